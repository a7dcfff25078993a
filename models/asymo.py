"""AsyMo (Wang et al., MobiCom '21): the matrix-multiply cost model of Table 2, its
fit by linear regression with 10-fold cross-validation, cost-model-directed block
partitioning for big and little clusters, and the least-energy frequency from data
reuse (eq. 2) and energy-frequency curves (section 4.4) -- compiled into the one
Problem representation: layers are the network's multiplies, a target is a set of
clusters at one frequency each.

Table 2 for an (M, K) x (K, N) multiply in (mc, K) x (K, nc) tasks of kc-deep steps:
  FLOP_task = mc nc kc,  Data_task = dtype/line (mc kc + kc nc + 2 mc nc)  [cache lines]
  Cost_seq  = K/kc (t_flop FLOP_task + t_data Data_task)
  Cost_par  = (M/mc)(N/nc)/Thread# Cost_seq
  Cost      = Cost_par + p Cost_seq + t_sched (M/mc)(N/nc)(K/kc) + t_fram
Counts are whole tasks (ceilings). Cost is linear in (t_flop, t_data, t_sched, t_fram)
for a fixed p, so the fit is ordinary least squares nested in a 1-D search over p.
Frequency: parameters are fitted at a cluster's highest level; below it, compute and
scheduling terms scale with f_max / f and data terms with the measured memory latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, Protocol, Sequence

import numpy as np

from planner.core.asymo_schema import AsymoCpu, AsymoNetwork, Cluster
from planner.core.errors import InputError
from planner.core.problem import Problem, Target

P_MAX = 8.0
MAX_CANDIDATES = 512
Intensity = Literal["computation", "memory"]


class AsymoInputs(Protocol):
    """What the cost model reads of an asymo request's options (the solver's
    `solvers.asymo.AsymoOptions`, parsed by models/compilers.py)."""

    intensity: str  # "auto", "computation" or "memory"
    split_by: str  # "measured", "peak" or "balanced"


# --------------------------------------------------------------------------- cost model


def cost_terms(m, k, n, mc, nc, kc, threads, dtype_bytes: int = 4, line_bytes: int = 64):
    """(seq_flop, seq_data, par, tasks): Table 2's steps (1)-(4) without the parameters."""
    m, k, n, mc, nc, kc, threads = (np.asarray(x, dtype=float) for x in (m, k, n, mc, nc, kc, threads))
    steps = np.ceil(k / kc)
    units = np.ceil(m / mc) * np.ceil(n / nc)
    seq_flop = steps * mc * nc * kc
    seq_data = steps * dtype_bytes / line_bytes * (mc * kc + kc * nc + 2 * mc * nc)
    return seq_flop, seq_data, units / threads, units * steps


@dataclass(frozen=True)
class MMCostModel:
    t_flop_ns: float
    t_data_ns: float
    t_sched_us: float
    t_fram_us: float
    p: float
    dtype_bytes: int = 4
    line_bytes: int = 64
    r2_fit: float | None = None
    r2_cv: float | None = None
    rows: int = 0

    def predict_ms(self, m, k, n, mc, nc, kc, threads, *, compute_scale: float = 1.0, data_scale: float = 1.0):
        sf, sd, par, tasks = cost_terms(m, k, n, mc, nc, kc, threads, self.dtype_bytes, self.line_bytes)
        seq_ns = sf * self.t_flop_ns * compute_scale + sd * self.t_data_ns * data_scale
        other_ns = (self.t_sched_us * tasks + self.t_fram_us) * 1e3 * compute_scale
        return ((par + self.p) * seq_ns + other_ns) * 1e-6

    @classmethod
    def fit(cls, rows: Sequence, dtype_bytes: int = 4, line_bytes: int = 64, folds: int = 10, seed: int = 0) -> "MMCostModel":
        """Rows have m, k, n, mc, nc, kc, threads, time_ms. Least squares for the four
        linear parameters inside a search over p; R^2 (of time_ms) in-sample and
        out-of-fold over `folds`-fold cross-validation (the paper: K = 10)."""
        A = np.array([[r.m, r.k, r.n, r.mc, r.nc, r.kc, r.threads, r.time_ms] for r in rows], dtype=float)
        if len(A) < 5:
            raise ValueError(f"{len(A)} rows cannot determine 5 parameters")
        terms = np.stack(cost_terms(*A[:, :7].T, dtype_bytes, line_bytes), axis=1)
        y = A[:, 7]
        coef, p = _fit_terms(terms, y)
        r2_cv = None
        if folds >= 2 and len(y) >= folds:
            order = np.random.default_rng(seed).permutation(len(y))
            oof = np.empty_like(y)
            for hold in np.array_split(order, folds):
                train = np.setdiff1d(order, hold)
                c_f, p_f = _fit_terms(terms[train], y[train])
                oof[hold] = _design(terms[hold], p_f) @ c_f
            r2_cv = _r2(y, oof)
        r2_fit = _r2(y, _design(terms, p) @ coef)
        return cls(*(float(x) for x in coef), float(p), dtype_bytes, line_bytes, r2_fit, r2_cv, len(y))

    def params(self) -> dict:
        return {"t_flop_ns": self.t_flop_ns, "t_data_ns": self.t_data_ns, "t_sched_us": self.t_sched_us,
                "t_fram_us": self.t_fram_us, "p": self.p}


@lru_cache(maxsize=32)
def _fit_rows(rows: tuple, dtype_bytes: int, line_bytes: int) -> MMCostModel:
    """Fits are deterministic; a CPU description is fitted once per process, not per plan."""
    return MMCostModel.fit([_Row(*r) for r in rows], dtype_bytes, line_bytes)


@dataclass(frozen=True)
class _Row:
    m: int
    k: int
    n: int
    mc: int
    nc: int
    kc: int
    threads: int
    time_ms: float


def _design(terms: np.ndarray, p: float) -> np.ndarray:
    sf, sd, par, tasks = terms.T
    return np.column_stack([(par + p) * sf * 1e-6, (par + p) * sd * 1e-6, tasks * 1e-3, np.full(len(sf), 1e-3)])


def _nnls(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients (a negative cost is meaningless):
    drop the most negative term and refit until none is."""
    scale = np.linalg.norm(X, axis=0)
    scale[scale == 0] = 1.0
    Xs = X / scale
    active = list(range(X.shape[1]))
    coef = np.zeros(X.shape[1])
    while active:
        c, *_ = np.linalg.lstsq(Xs[:, active], y, rcond=None)
        if (c >= 0).all():
            coef[:] = 0
            coef[active] = c
            break
        active.pop(int(np.argmin(c)))
    return coef / scale


def _fit_terms(terms: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Relative residuals (rows weighted by 1/time): measured times span four orders of
    magnitude with roughly proportional noise, and in absolute terms the largest
    multiplies would drown the scheduling and framework costs that small ones reveal."""
    w = 1.0 / y

    def sse(p: float) -> tuple[float, np.ndarray]:
        X = _design(terms, p) * w[:, None]
        c = _nnls(X, np.ones_like(y))
        r = X @ c - 1.0
        return float(r @ r), c

    grid = np.linspace(0.0, P_MAX, 161)
    vals = [sse(p)[0] for p in grid]
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c1, c2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = sse(c1)[0], sse(c2)[0]
    for _ in range(50):
        if f1 <= f2:
            b, c2, f2 = c2, c1, f1
            c1 = b - g * (b - a)
            f1 = sse(c1)[0]
        else:
            a, c1, f1 = c1, c2, f2
            c2 = a + g * (b - a)
            f2 = sse(c2)[0]
    cands = [(vals[i], grid[i]), (f1, c1), (f2, c2)]
    _, p = min(cands)
    return sse(p)[1], float(p)


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0


def fit_cluster(cluster: Cluster, dtype_bytes: int, index: int = 0) -> MMCostModel:
    if cluster.samples:
        rows = tuple((r.m, r.k, r.n, r.mc, r.nc, r.kc, r.threads, r.time_ms) for r in cluster.samples)
        try:
            return _fit_rows(rows, dtype_bytes, cluster.cache_line_bytes)
        except (ValueError, np.linalg.LinAlgError) as exc:
            raise InputError(f"clusters[{index}].samples", f"cannot fit the cost model: {exc}") from None
    cm = cluster.cost_model
    assert cm is not None  # the document guarantees samples or cost_model
    return MMCostModel(cm.t_flop_ns, cm.t_data_ns, cm.t_sched_us, cm.t_fram_us, cm.p, dtype_bytes, cluster.cache_line_bytes)


# --------------------------------------------------------------------------- partitioning


@dataclass(frozen=True)
class Blocks:
    mc: int
    nc: int
    kc: int
    units: int  # sequential units (M/mc)(N/nc)
    steps: int  # K/kc tasks per unit
    time_ms: float

    def tasks_per_core(self, threads: int) -> tuple[int, ...]:
        """Units go to the shortest queue (section 4.3): cores differ by at most one."""
        base, extra = divmod(self.units, threads)
        return tuple((base + (c < extra)) * self.steps for c in range(threads))


def block_candidates(m: int, n: int, threads: int, mr: int, nr: int) -> np.ndarray:
    """Constraint (2): mc = nc = sqrt(MN / (i Thread#)) for i = 1, 2, ...; a block
    larger than M (or N), as in MV, leaves that dimension whole and divides only the
    other. Rounded up to the elementary block, clipped to the matrix; (mc, nc) rows."""
    top = max(1, min(MAX_CANDIDATES, math.ceil(m * n / (threads * mr * nr))))
    i = np.arange(1, top + 1, dtype=float)
    units = i * threads
    b = np.sqrt(m * n / units)
    mc, nc = b.copy(), b.copy()
    over_m, over_n = b > m, b > n
    mc[over_m], nc[over_m] = m, n / units[over_m]
    nc[over_n], mc[over_n] = n, m / units[over_n]
    mc = np.minimum(np.ceil(np.maximum(mc, 1) / mr) * mr, m)
    nc = np.minimum(np.ceil(np.maximum(nc, 1) / nr) * nr, n)
    return np.unique(np.column_stack([mc, nc]).astype(np.int64), axis=0)


def best_blocks(model: MMCostModel, cluster: Cluster, m: int, k: int, n: int, *, threads: int | None = None,
                compute_scale: float = 1.0, data_scale: float = 1.0) -> Blocks | None:
    """The least-cost candidate of Constraint (2) whose kc meets Constraint (1): the
    elementary block in L1 and every thread's task in the shared L2."""
    thr = threads or cluster.cores
    cand = block_candidates(m, n, thr, cluster.mr, cluster.nr)
    mc, nc = cand[:, 0].astype(float), cand[:, 1].astype(float)
    words_l1 = cluster.l1_bytes / model.dtype_bytes
    words_l2 = cluster.l2_bytes / model.dtype_bytes / thr
    kc1 = math.floor((words_l1 - cluster.mr * cluster.nr) / (cluster.mr + cluster.nr))
    kc2 = np.floor((words_l2 - mc * nc) / (mc + nc))
    kc = np.minimum(np.minimum(kc2, kc1), k)
    ok = kc >= 1
    if not ok.any():
        return None
    mc, nc, kc = mc[ok], nc[ok], kc[ok]
    cost = model.predict_ms(m, k, n, mc, nc, kc, thr, compute_scale=compute_scale, data_scale=data_scale)
    j = int(np.argmin(cost))
    units = int(math.ceil(m / mc[j]) * math.ceil(n / nc[j]))
    return Blocks(int(mc[j]), int(nc[j]), int(kc[j]), units, int(math.ceil(k / kc[j])), float(cost[j]))


def data_reuse(m, k, n):
    """Eq. 2: FLOPs per element moved, 2MNK / (MK + NK + 2MN)."""
    m, k, n = (np.asarray(x, dtype=float) for x in (m, k, n))
    return 2 * m * n * k / (m * k + n * k + 2 * m * n)


def ridge_point(cluster: Cluster, dtype_bytes: int) -> float:
    """Roofline ridge in eq. 2's unit (FLOPs per element): above it an op is
    computation-bound on this cluster, below it memory-bound."""
    return cluster.cores * cluster.peak_gflops / cluster.mem_bandwidth_gbps * dtype_bytes


def energy_curve(cluster: Cluster, intensity: Intensity) -> list[tuple[float, float]]:
    """Section 5: energy per unit of work at each level, 1/f x P_comp (computation
    benchmark) or t_mem x P_mem (memory benchmark); (freq_mhz, energy) sorted by f."""
    pts = sorted(cluster.energy_curve, key=lambda c: c.freq_mhz)
    if intensity == "computation":
        return [(c.freq_mhz, c.comp_power_w / c.freq_mhz * 1e3) for c in pts]  # W / GHz = nJ per cycle
    return [(c.freq_mhz, c.mem_latency_ns * c.mem_power_w) for c in pts]  # nJ per access


def least_energy_frequency(cluster: Cluster, intensity: Intensity) -> float:
    """Lowest point of the curve; a tie goes to the higher frequency (faster, same energy)."""
    curve = energy_curve(cluster, intensity)
    best = min(e for _, e in curve)
    return max(f for f, e in curve if e <= best * (1 + 1e-12))


# --------------------------------------------------------------------------- options


# --------------------------------------------------------------------------- compile


@dataclass(frozen=True)
class Share:
    cluster: str
    freq_mhz: float
    size: int  # rows (or columns) of the split dimension it computes
    blocks: Blocks | None
    tasks_per_core: tuple[int, ...]
    time_ms: float
    power_w: float
    intensity: Intensity

    @property
    def energy_mj(self) -> float:
        return self.power_w * self.time_ms


@dataclass(frozen=True)
class OpPlan:
    op: str
    m: int
    k: int
    n: int
    split_dim: Literal["m", "n"]
    shares: tuple[Share, ...]

    @property
    def kind(self) -> str:
        return "MV" if min(self.m, self.n) == 1 else "MM"

    @property
    def time_ms(self) -> float:
        return max(s.time_ms for s in self.shares)

    @property
    def energy_mj(self) -> float:
        return sum(s.energy_mj for s in self.shares)


def split_sizes(total: int, weights: Sequence[float]) -> list[int]:
    """Largest-remainder division of `total` rows in proportion to `weights`."""
    w = np.asarray(weights, dtype=float)
    raw = total * w / w.sum()
    out = np.floor(raw).astype(int)
    for j in np.argsort(-(raw - out), kind="stable")[: total - out.sum()]:
        out[j] += 1
    return [int(x) for x in out]


@dataclass(frozen=True, eq=False)
class AsymoProblem(Problem):
    plans: dict = field(default_factory=dict)  # target label -> tuple[OpPlan, ...]
    info: dict = field(default_factory=dict)


def plan_op(cpu: AsymoCpu, models: dict[str, MMCostModel], setting: dict[str, float], op_id: str, m: int, k: int, n: int,
            intensity_of, cache: dict | None = None, split_by: str = "measured") -> OpPlan:
    """Processor-level split of the larger matrix by capability (section 4.2, Fig. 8),
    then each cluster's least-cost blocks."""
    cache = {} if cache is None else cache
    clusters = [c for c in cpu.clusters if c.id in setting]

    def blocks_for(c: Cluster, mm: int, nn: int) -> Blocks:
        f = setting[c.id]
        key = (c.id, f, mm, k, nn)
        if key not in cache:
            pt = {p.freq_mhz: p for p in c.energy_curve}
            cache[key] = best_blocks(models[c.id], c, mm, k, nn, compute_scale=c.max_freq_mhz / f,
                                     data_scale=pt[f].mem_latency_ns / pt[c.max_freq_mhz].mem_latency_ns)
        if cache[key] is None:
            raise InputError(f"clusters[{cpu.clusters.index(c)}].l2_bytes",
                             f"no block of op '{op_id}' ({mm}x{k}x{nn}) fits the caches (Constraint 1)")
        return cache[key]

    split_dim: Literal["m", "n"] = "m" if m * k >= k * n else "n"
    total = m if split_dim == "m" else n
    dims = (lambda size: (size, n)) if split_dim == "m" else (lambda size: (m, size))
    if split_by == "peak" or len(clusters) == 1:
        sizes = split_sizes(total, [c.cores * c.peak_gflops * setting[c.id] / c.max_freq_mhz for c in clusters])
    else:
        sizes = split_sizes(total, [1.0 / max(blocks_for(c, m, n).time_ms, 1e-12) for c in clusters])
        if split_by == "balanced" and len(clusters) == 2:
            a, b = clusters

            def worst(x: int) -> float:
                return max(blocks_for(a, *dims(x)).time_ms if x else 0.0,
                           blocks_for(b, *dims(total - x)).time_ms if x < total else 0.0)

            grid = sorted({0, total, sizes[0], *np.round(np.linspace(0, total, 33)).astype(int).tolist()})
            x = min(grid, key=lambda g: (worst(g), abs(g - sizes[0])))
            sizes = [x, total - x]
    shares = []
    for c, size in zip(clusters, sizes):
        f = setting[c.id]
        if size == 0:
            shares.append(Share(c.id, f, 0, None, (0,) * c.cores, 0.0, 0.0, "computation"))
            continue
        mm, nn = (size, n) if split_dim == "m" else (m, size)
        pt = {p.freq_mhz: p for p in c.energy_curve}
        blocks = blocks_for(c, mm, nn)
        kind = intensity_of(c, mm, k, nn)
        power = pt[f].comp_power_w if kind == "computation" else pt[f].mem_power_w
        shares.append(Share(c.id, f, size, blocks, blocks.tasks_per_core(c.cores), blocks.time_ms, power, kind))
    return OpPlan(op_id, m, k, n, split_dim, tuple(shares))


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def settings(cpu: AsymoCpu) -> list[tuple[tuple[Cluster, ...], dict[str, float]]]:
    """Every non-empty set of clusters (all of them first), each at every combination of
    its clusters' levels (a cluster that does not scale stays at its highest)."""
    import itertools

    out = []
    n = len(cpu.clusters)
    for size in range(n, 0, -1):
        for combo in itertools.combinations(cpu.clusters, size):
            levels = [sorted(c.freqs_mhz) if c.scale_frequency else [c.max_freq_mhz] for c in combo]
            for freqs in itertools.product(*levels):
                out.append((combo, {c.id: f for c, f in zip(combo, freqs)}))
    return out


def compile_asymo(cpu: AsymoCpu, net: AsymoNetwork, options: AsymoInputs) -> AsymoProblem:
    opts = options
    models = {c.id: fit_cluster(c, cpu.dtype_bytes, i) for i, c in enumerate(cpu.clusters)}
    m = np.array([o.m for o in net.ops])
    k = np.array([o.k for o in net.ops])
    n = np.array([o.n for o in net.ops])
    reuse_net = float((2.0 * m * n * k).sum() / (m * k + n * k + 2.0 * m * n).sum())
    ridge = {c.id: ridge_point(c, cpu.dtype_bytes) for c in cpu.clusters}

    def net_intensity(c: Cluster) -> Intensity:
        if opts.intensity != "auto":
            return opts.intensity  # type: ignore[return-value]
        return "computation" if reuse_net >= ridge[c.id] else "memory"

    def op_intensity(c: Cluster, mm: int, kk: int, nn: int) -> Intensity:
        if opts.intensity != "auto":
            return opts.intensity  # type: ignore[return-value]
        return "computation" if float(data_reuse(mm, kk, nn)) >= ridge[c.id] else "memory"

    least = {c.id: least_energy_frequency(c, net_intensity(c)) if c.scale_frequency else c.max_freq_mhz
             for c in cpu.clusters}
    targets: list[Target] = []
    cache: dict = {}
    plans: dict[str, tuple[OpPlan, ...]] = {}
    cols_t, cols_e = [], []
    for ci, (combo, setting) in enumerate(settings(cpu)):
        primary = next((c for c in combo if c.scale_frequency), combo[0])
        levels = sorted(primary.freqs_mhz)
        f0 = setting[primary.id]
        extra = tuple((f"{c.id}_mhz", _num(setting[c.id])) for c in combo if c is not primary)
        tgt = Target("+".join(c.id for c in combo), cpu.clusters.index(combo[0]), "".join(c.letter for c in combo), f0,
                     None, levels.index(f0), all(setting[c.id] == c.max_freq_mhz for c in combo), extra)
        ops = tuple(plan_op(cpu, models, setting, o.id, o.m, o.k, o.n, op_intensity, cache, opts.split_by) for o in net.ops)
        plans[tgt.label] = ops
        targets.append(tgt)
        cols_t.append([p.time_ms for p in ops])
        cols_e.append([p.energy_mj for p in ops])
    L = len(net.ops)
    db = cpu.dtype_bytes
    zeros = np.zeros((L, len(targets)))
    info = {
        "cost_model": {c.id: {**{k2: round(v, 6) for k2, v in models[c.id].params().items()},
                              "rows": models[c.id].rows,
                              "r2_fit": None if models[c.id].r2_fit is None else round(models[c.id].r2_fit, 4),
                              "r2_cv_10fold": None if models[c.id].r2_cv is None else round(models[c.id].r2_cv, 4),
                              "source": "fitted to samples" if c.samples else "cost_model given"}
                       for c in cpu.clusters},
        "frequency": {
            "network_data_reuse": round(reuse_net, 3),
            "clusters": {c.id: {"ridge_flop_per_element": round(ridge[c.id], 3), "curve": net_intensity(c),
                                "scales": c.scale_frequency, "least_energy_mhz": least[c.id],
                                "energy_curve": [[f, round(e, 4)] for f, e in energy_curve(c, net_intensity(c))]}
                         for c in cpu.clusters},
        },
        "least_energy_mhz": least,
        "clusters": [c.id for c in cpu.clusters],
    }
    return AsymoProblem(
        name=net.name,
        platform_name=cpu.name,
        layer_ids=tuple(o.id for o in net.ops),
        op_types=tuple(o.op_type for o in net.ops),
        input_bytes=((m * k + k * n) * db).astype(np.int64),
        output_bytes=(m * n * db).astype(np.int64),
        weight_bytes=(m * k * db).astype(np.int64),
        memory_bytes=np.zeros(L, dtype=np.int64),
        predecessors=tuple(((i - 1,) if i else ()) for i in range(L)),
        targets=tuple(targets),
        exec_time_ms=np.array(cols_t, dtype=float).T.copy(),
        exec_energy_mj=np.array(cols_e, dtype=float).T.copy(),
        comm_in_time_ms=zeros,
        comm_out_time_ms=zeros,
        comm_in_energy_mj=zeros,
        comm_out_energy_mj=zeros,
        memory_limit_bytes=np.full(len(targets), np.inf),
        notes=(),
        plans=plans,
        info=info,
    )
