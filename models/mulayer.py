"""muLayer (Kim et al., EuroSys '19) compiled into the one Problem representation.

Three kinds of execution target, all at each device's highest DVFS level (muLayer
does not scale frequency):

- single (device, dtype): the whole layer on one processor in one data type. Costs
  are the shared MOSAIC compile of the profile's measurements in that type (section 4:
  QUInt8 suits the CPU, F16 the GPU; untyped measurements are the native F32).
- cooperative (device pair, split p, a dtype per device): channel-wise workload
  distribution (section 3.2). The first device computes a share p of the output
  channels, the second 1 - p; convolutional and fully-connected layers split their
  filters (the input is shared), pooling-like layers split their input. Each share's
  time comes from the latency predictor (section 6: Neurosurgeon's logarithmic
  regression over layer parameters, extended with p); the layer costs the slower
  share plus the synchronisation/merge overhead.
- branch (device, dtype): a twin of a single target, marking a layer as part of a
  branch-distributed module (section 5; planner/branches.py evaluates it).

The profile's per-layer measurements stay the anchor: by default a share costs the
measured single-processor time scaled by the regression's prediction for the share
over its prediction for the whole layer (`predictor="anchored"`); `"regression"`
prices everything from the fitted regression alone, as the paper's predictor does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal, Mapping, Protocol, Sequence

import numpy as np

from models.communication import LinearCommModel
from models.compile import _runs, comm_models, compile_problem
from planner.core.branches import BRANCH_MODE, find_branch_regions
from planner.core.errors import InputError, Issue, UnsupportedRequest
from planner.core.problem import Problem, Target
from planner.core.schema import ModelProfile, Platform

NATIVE_DTYPE = "f32"
SplitKind = Literal["filter", "input", "none"]


class SyncPoint(Protocol):
    bytes: int
    time_ms: float


class MuLayerInputs(Protocol):
    """What the cost model reads of a mulayer request's options (the solver's
    `solvers.mulayer.MuLayerOptions`, parsed by models/compilers.py): named here, since
    a cost model never imports a solver."""

    ratios: Sequence[float]
    dtypes: Sequence[str] | None
    cooperative: bool
    branch_distribution: bool
    predictor: str
    sync_scale: float
    sync_samples: Sequence[SyncPoint] | None
    split_kinds: Mapping[str, SplitKind]

# How a layer is divided channel-wise (section 3.2): "filter" = the filters (output
# channels) are divided and the input shared; "input" = the input channels are divided.
SPLIT_KINDS: dict[str, SplitKind] = {
    **dict.fromkeys(["conv", "conv2d", "fc", "dense", "linear", "gemm", "matmul", "pointwise"], "filter"),
    **dict.fromkeys(["pool", "maxpool", "avgpool", "dwconv", "depthwise", "lrn", "relu", "bn", "batchnorm"], "input"),
}


# --------------------------------------------------------------------------- options


# --------------------------------------------------------------------------- predictor


@dataclass(frozen=True)
class LogLinearFit:
    """log t = c0 + c_work log(work) + c_data log(data): Neurosurgeon's logarithmic
    regression of a layer's time on its parameters (work: multiply-accumulates for
    filter layers, input bytes for input-split ones; data: bytes touched)."""

    c0: float
    c_work: float
    c_data: float
    n: int
    r2: float | None
    form: Literal["work+data", "work", "linear"]

    @classmethod
    def fit(cls, work: np.ndarray, data: np.ndarray, time_ms: np.ndarray) -> "LogLinearFit":
        """Least squares in log space with as many terms as the rows support: both
        features from 6 rows, work alone from 3, else time proportional to work."""
        w, d, t = (np.log(np.asarray(a, dtype=float)) for a in (work, data, time_ms))
        n = t.size
        if n == 0:
            return cls(0.0, 1.0, 0.0, 0, None, "linear")
        for form, cols, need in (("work+data", [w, d], 6), ("work", [w], 3)):
            X = np.column_stack([np.ones(n), *cols])
            if n >= need and np.linalg.matrix_rank(X) == X.shape[1]:
                coef, *_ = np.linalg.lstsq(X, t, rcond=None)
                c = [float(x) for x in coef] + [0.0] * (3 - len(coef))
                return cls(c[0], c[1], c[2], n, _r2(t, X @ coef), form)  # type: ignore[arg-type]
        c0 = float((t - w).mean())
        return cls(c0, 1.0, 0.0, n, _r2(t, c0 + w) if n > 1 else None, "linear")

    def predict_ms(self, work, data):
        return np.exp(self.c0 + self.c_work * np.log(work) + self.c_data * np.log(data))

    def share(self, work: float, data: float, work_p: float, data_p: float) -> float:
        """Predicted time of a share over predicted time of the whole layer."""
        return math.exp(self.c_work * math.log(work_p / work) + self.c_data * math.log(data_p / data))

    def summary(self) -> dict:
        return {"form": self.form, "rows": self.n, "r2_log": None if self.r2 is None else round(self.r2, 4),
                "work_exponent": round(self.c_work, 4), "data_exponent": round(self.c_data, 4)}


def _r2(y: np.ndarray, pred: np.ndarray) -> float | None:
    ss_tot = float(((y - y.mean()) ** 2).sum())
    if ss_tot == 0:
        return None
    return 1.0 - float(((y - pred) ** 2).sum()) / ss_tot


def features(kind: SplitKind, input_bytes: float, weight_bytes: float, output_bytes: float, macs: float | None,
             p: float = 1.0) -> tuple[float, float] | None:
    """(work, data) of a share p of a layer, section 3.2: filter layers divide the
    filters (weights and outputs) and read the whole input; input-split layers divide
    everything. None when the layer has no usable parameters."""
    if kind == "filter":
        if not macs:
            return None
        work, data = p * macs, input_bytes + p * (weight_bytes + output_bytes)
    elif kind == "input":
        work, data = p * input_bytes, p * (input_bytes + weight_bytes + output_bytes)
    else:
        return None
    return (work, data) if work > 0 and data > 0 else None


# --------------------------------------------------------------------------- problem


@dataclass(frozen=True, eq=False)
class MuLayerProblem(Problem):
    info: dict = field(default_factory=dict)  # predictor fits, sync model, modules: shown in the plan's report


def dtype_label(raw: str | None) -> str:
    return NATIVE_DTYPE if raw is None else raw


def split_kind(op_type: str, options: MuLayerInputs) -> SplitKind:
    return options.split_kinds.get(op_type, SPLIT_KINDS.get(op_type.lower(), "none"))


def _dtype_profile(platform: Platform, profile: ModelProfile, raw: str | None):
    """The profile restricted to one data type's measurements (as untyped ones), so the
    shared compile prices it; with the kept layer indices and measurement indices."""
    devs = {d.id: d for d in platform.devices}
    keep, mmap, layers = [], [], []
    for i, layer in enumerate(profile.layers):
        idx = [j for j, m in enumerate(layer.measurements)
               if m.dtype == raw and m.cores is None and (m.device not in devs or _runs(devs[m.device], layer.op_type))]
        if not idx:
            continue
        keep.append(i)
        mmap.append(idx)
        ms = [layer.measurements[j].model_copy(update={"dtype": None}) for j in idx]
        layers.append(layer.model_copy(update={"predecessors": None, "measurements": ms}))
    return profile.model_copy(update={"layers": layers}), keep, mmap


def _remap(err: InputError, keep: list[int], mmap: list[list[int]]) -> InputError:
    def fix(path: str) -> str:
        m = re.match(r"^layers\[(\d+)\](\.measurements\[(\d+)\])?", path)
        if not m:
            return path
        i = int(m.group(1))
        head = f"layers[{keep[i]}]" + (f".measurements[{mmap[i][int(m.group(3))]}]" if m.group(2) else "")
        return head + path[m.end():]

    return InputError([Issue(fix(i.path), i.reason) for i in err.issues])


def _power(time_ms: np.ndarray, energy_mj: np.ndarray) -> np.ndarray:
    """Average power (W) where a time is finite and positive, else 0."""
    ok = np.isfinite(time_ms) & (time_ms > 0) & np.isfinite(energy_mj)
    out = np.zeros_like(time_ms, dtype=float)
    out[ok] = energy_mj[ok] / time_ms[ok]
    return out


def _dtype_labels(profile: ModelProfile, opts: MuLayerInputs) -> tuple[dict[str, str | None], list[str]]:
    """The data types the profile measured (label -> the measurements' dtype, None:
    untyped = f32), narrowed to `options.dtypes`, and their labels in order."""
    raws: list[str | None] = []
    for layer in profile.layers:
        for m in layer.measurements:
            if m.cores is None and m.dtype not in raws:
                raws.append(m.dtype)
    if None in raws and NATIVE_DTYPE in raws:
        li, mi = next((i, j) for i, layer in enumerate(profile.layers) for j, m in enumerate(layer.measurements)
                      if m.dtype == NATIVE_DTYPE)
        raise InputError(f"layers[{li}].measurements[{mi}].dtype",
                         f"'{NATIVE_DTYPE}' is also the type of untyped measurements; give F32 one way only")
    labels = {dtype_label(r): r for r in raws}
    if opts.dtypes is not None:
        bad = [Issue(f"options.dtypes[{i}]", f"no measurement in dtype '{q}' (profile has: {', '.join(sorted(labels))})")
               for i, q in enumerate(opts.dtypes) if q not in labels]
        if bad:
            raise InputError(bad)
        labels = {q: labels[q] for q in opts.dtypes}
    return labels, sorted(labels)


def _singles(platform: Platform, profile: ModelProfile, labels: dict[str, str | None], dtypes: list[str],
             notes: list[str]) -> list[dict]:
    """Each single (device, dtype) target at the device's highest level: the shared
    compile of that type's measurements (time, energy and power per layer)."""
    singles: list[dict] = []
    L, devices = len(profile.layers), platform.devices
    for q in dtypes:
        sub, keep, mmap = _dtype_profile(platform, profile, labels[q])
        if not keep:
            continue
        try:
            base = compile_problem(platform, sub)
        except InputError as exc:
            raise _remap(exc, keep, mmap) from None
        notes.extend(f"[{q}] {n}" for n in base.notes)
        for di, d in enumerate(devices):
            ti = next(i for i, t in enumerate(base.targets) if t.device_id == d.id and t.is_max_level)
            t_ms = np.full(L, np.inf)
            e_mj = np.full(L, np.inf)
            t_ms[keep] = base.exec_time_ms[:, ti]
            e_mj[keep] = base.exec_energy_mj[:, ti]
            if not np.isfinite(t_ms).any():
                continue
            power = _power(t_ms, e_mj)
            singles.append({"device": di, "dtype": q, "time": t_ms, "energy": e_mj, "power": power})
    singles.sort(key=lambda s: (s["device"], s["dtype"]))
    return singles


def _latency_fits(singles: list[dict], kinds: list[str], feats: list, predictor: str) -> dict[tuple[int, str, str], LogLinearFit]:
    """The latency predictor: one log-linear fit per (device, dtype, split kind); with
    the regression predictor, the singles' times (and energies) are its predictions."""
    L = len(kinds)
    fits: dict[tuple[int, str, str], LogLinearFit] = {}
    for s in singles:
        for kind in ("filter", "input"):
            rows = [i for i in range(L) if kinds[i] == kind and feats[i] is not None
                    and np.isfinite(s["time"][i]) and s["time"][i] > 0]
            if rows:
                fits[(s["device"], s["dtype"], kind)] = LogLinearFit.fit(
                    [feats[i][0] for i in rows], [feats[i][1] for i in rows], s["time"][rows])
    if predictor == "regression":
        for s in singles:
            for i in range(L):
                fit = fits.get((s["device"], s["dtype"], kinds[i]))
                if fit is not None and feats[i] is not None and np.isfinite(s["time"][i]):
                    s["time"][i] = float(fit.predict_ms(*feats[i]))
                    s["energy"][i] = s["power"][i] * s["time"][i]
    return fits


def _sync_overhead(opts: MuLayerInputs, moved_bytes: np.ndarray, cin_dev: np.ndarray, cout_dev: np.ndarray):  # noqa: ANN202
    """The synchronisation / merge overhead of a cooperative layer on a device pair (per
    layer, ms), fitted from `options.sync_samples` or the pair's communication models,
    and how it was found."""
    if opts.sync_samples is not None:
        try:
            sync_model = LinearCommModel.fit([x.bytes for x in opts.sync_samples], [x.time_ms for x in opts.sync_samples])
        except ValueError as exc:
            raise InputError("options.sync_samples", str(exc)) from None
        sync_pair = lambda a, b: sync_model.predict_ms(moved_bytes)  # noqa: E731
        sync_info = {"source": "options.sync_samples", "alpha_ms_per_byte": sync_model.alpha_ms_per_byte,
                     "beta_ms": sync_model.beta_ms, "r2": sync_model.r2}
    else:
        sync_pair = lambda a, b: cin_dev[:, a] + cout_dev[:, a] + cin_dev[:, b] + cout_dev[:, b]  # noqa: E731
        sync_info = {"source": "the pair's communication models: input and output mapped once per layer"}
    sync_info["scale"] = opts.sync_scale
    return sync_pair, sync_info


def _limit_bytes(device) -> float:  # noqa: ANN001
    return float(device.memory_limit_bytes or math.inf)


def _cooperative(singles: list[dict], kinds: list[str], share_ms, sync_pair, opts: MuLayerInputs, devices,  # noqa: ANN001
                 fmax: list) -> list[tuple[Target, np.ndarray, np.ndarray, float]]:
    """The channel-wise split targets (section 3.2): each pair of singles on two devices
    at each ratio p, a layer as long as its slower share plus the pair's synchronisation;
    (target, time and energy per layer, memory limit)."""
    L = len(kinds)
    out: list[tuple[Target, np.ndarray, np.ndarray, float]] = []
    for sa in singles:
        for sb in singles:
            a, b = sa["device"], sb["device"]
            if a >= b:
                continue
            sync = sync_pair(a, b) * opts.sync_scale
            for p in opts.ratios:
                t = np.full(L, np.inf)
                e = np.full(L, np.inf)
                for i in range(L):
                    if kinds[i] == "none":
                        continue
                    ta, tb = share_ms(sa, i, p), share_ms(sb, i, 1.0 - p)
                    if math.isfinite(ta) and math.isfinite(tb):
                        pa, pb = float(sa["power"][i]), float(sb["power"][i])
                        t[i] = max(ta, tb) + sync[i]
                        e[i] = pa * ta + pb * tb + 0.5 * (pa + pb) * sync[i]
                if not np.isfinite(t).any():
                    continue
                da, db = devices[a], devices[b]
                target = Target(f"{da.id}+{db.id}", a, da.letter + db.letter, fmax[a].freq_mhz, fmax[a].voltage_v,
                                len(da.dvfs_levels) - 1, True, (("p", p), ("dtype", f"{sa['dtype']}+{sb['dtype']}")))
                out.append((target, t, e, min(_limit_bytes(da), _limit_bytes(db))))
    return out


def _device_comm(devices, fmax: list, in_b: np.ndarray, out_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """Each layer's input and output transfer time (ms) on each device at its highest level."""
    cin_dev = np.zeros((len(in_b), len(devices)))
    cout_dev = np.zeros((len(in_b), len(devices)))
    for di, d in enumerate(devices):
        predict = comm_models(d, di)[fmax[di].freq_mhz]
        cin_dev[:, di] = predict(in_b)
        cout_dev[:, di] = predict(out_b)
    return cin_dev, cout_dev


def _check_runnable(singles: list[dict], profile: ModelProfile, dtypes: list[str]) -> None:
    runnable = np.zeros(len(profile.layers), dtype=bool)
    for s in singles:
        runnable |= np.isfinite(s["time"])
    if not runnable.all():
        i = int(np.flatnonzero(~runnable)[0])
        raise InputError(f"layers[{i}]", f"no device can run layer '{profile.layers[i].id}' in "
                         f"{', '.join(dtypes)}: no usable measurement on a device that supports the op")


def _single_column(s: dict, extra: tuple, devices, fmax: list, cin_dev: np.ndarray, cout_dev: np.ndarray) -> tuple:  # noqa: ANN001
    """A single's target column: (target, time, energy, comm in, comm out, memory limit)."""
    di = s["device"]
    d, lv = devices[di], fmax[di]
    target = Target(d.id, di, d.letter, lv.freq_mhz, lv.voltage_v, len(d.dvfs_levels) - 1, True, (("dtype", s["dtype"]), *extra))
    return target, s["time"], s["energy"], cin_dev[:, di], cout_dev[:, di], _limit_bytes(d)


def build_problem(platform: Platform, profile: ModelProfile, options: MuLayerInputs) -> MuLayerProblem:
    opts = options
    if platform.transitions or getattr(platform, "transition_costs", None) or any(
        getattr(layer, "transition_costs", None) for layer in profile.layers
    ):
        raise UnsupportedRequest(
            "solver", "mulayer does not model device-pair transition costs (platform.transitions / transition_costs); "
            "use dp or another slicing solver for this platform"
        )
    L = len(profile.layers)
    devices = platform.devices
    labels, dtypes = _dtype_labels(profile, opts)

    in_b = np.array([layer.input_bytes for layer in profile.layers], dtype=np.int64)
    out_b = np.array([layer.output_bytes for layer in profile.layers], dtype=np.int64)
    w_b = np.array([layer.weight_bytes for layer in profile.layers], dtype=np.int64)
    mem = np.array([layer.footprint_bytes for layer in profile.layers], dtype=np.int64)
    fmax = [max(d.dvfs_levels, key=lambda lv: lv.freq_mhz) for d in devices]
    cin_dev, cout_dev = _device_comm(devices, fmax, in_b, out_b)

    notes: list[str] = []
    singles = _singles(platform, profile, labels, dtypes, notes)
    _check_runnable(singles, profile, dtypes)

    # the latency predictor: one log-linear fit per (device, dtype, split kind)
    kinds = [split_kind(layer.op_type, opts) for layer in profile.layers]
    feats = [features(k, in_b[i], w_b[i], out_b[i], profile.layers[i].macs) for i, k in enumerate(kinds)]
    fits = _latency_fits(singles, kinds, feats, opts.predictor)
    unscaled = sorted({profile.layers[i].id for i in range(L) if kinds[i] == "filter" and feats[i] is None})
    if unscaled and opts.cooperative:
        notes.append(f"{len(unscaled)} filter layer(s) without macs (e.g. '{unscaled[0]}'): their shares scale linearly in p")

    def share_ms(s: dict, i: int, p: float) -> float:
        t = float(s["time"][i])
        if not math.isfinite(t):
            return math.inf
        fit = fits.get((s["device"], s["dtype"], kinds[i]))
        if fit is None or feats[i] is None:
            return t * p
        part = features(kinds[i], in_b[i], w_b[i], out_b[i], profile.layers[i].macs, p)
        if opts.predictor == "regression":
            return float(fit.predict_ms(*part))  # type: ignore[misc]
        return t * min(1.0, fit.share(*feats[i], *part))  # type: ignore[misc]

    sync_pair, sync_info = _sync_overhead(opts, in_b + out_b, cin_dev, cout_dev)

    # one column per target: (target, time, energy, comm in, comm out per layer, memory limit)
    zero = np.zeros(L)
    cols = [_single_column(s, (), devices, fmax, cin_dev, cout_dev) for s in singles]
    if opts.cooperative:
        cols += [(target, t, e, zero, zero, limit)
                 for target, t, e, limit in _cooperative(singles, kinds, share_ms, sync_pair, opts, devices, fmax)]
    preds = tuple(tuple(p) for p in profile.predecessor_indices())
    regions = find_branch_regions(preds)
    if opts.branch_distribution and regions:
        cols += [_single_column(s, (BRANCH_MODE,), devices, fmax, cin_dev, cout_dev) for s in singles]
    targets = [c[0] for c in cols]
    ex_t, ex_e, c_in, c_out = (np.column_stack([c[k] for c in cols]) for k in (1, 2, 3, 4))
    limits = [c[5] for c in cols]
    power = _power(ex_t, ex_e)
    ids = [layer.id for layer in profile.layers]
    info = {
        "dtypes": dtypes,
        "ratios": list(opts.ratios),
        "predictor": opts.predictor,
        "fits": [{"device": devices[d].id, "dtype": q, "kind": k, **f.summary()} for (d, q, k), f in sorted(fits.items())],
        "sync": sync_info,
        "modules": [{"fork": ids[r.fork], "join": ids[r.join], "branches": [[ids[a], ids[b]] for a, b in r.branches]}
                    for r in regions],
    }
    return MuLayerProblem(
        name=profile.name,
        platform_name=platform.name,
        layer_ids=tuple(ids),
        op_types=tuple(layer.op_type for layer in profile.layers),
        input_bytes=in_b,
        output_bytes=out_b,
        weight_bytes=w_b,
        memory_bytes=mem,
        predecessors=preds,
        targets=tuple(targets),
        exec_time_ms=ex_t,
        exec_energy_mj=ex_e,
        comm_in_time_ms=c_in,
        comm_out_time_ms=c_out,
        comm_in_energy_mj=power * c_in,
        comm_out_energy_mj=power * c_out,
        memory_limit_bytes=np.array(limits),
        fallback_order=tuple(platform.default_fallback()),
        notes=tuple(notes),
        info=info,
    )
