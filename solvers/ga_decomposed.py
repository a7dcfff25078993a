"""The GA's "decomposed" strategy (the default for several networks, response-time mode):
an evolutionary search whose individuals are one network's mapping, not the joint one.

Why: a joint mapping's objectives decompose by network. Each network's own ASAP
schedule, mobility, busy time, blocking, energy and dbf are fixed by its own mapping
(planner.core.multiapp.NetworkTerms), and the joint response times, energy and
schedulability follow from one candidate per network in a few vector operations
(evaluate_combinations: ~1M joint mappings/s against ~5k/s for evaluate_batch on the
Galaxy S9 trio, bench/multiapp.py). The joint front of several networks is largely a
product of the networks' own trade-offs, which a GA over concatenated chromosomes
rebuilds one lucky crossover at a time; here every new mapping of one network is tried
at once beside many of the front's mappings of the others (incremental evaluation of a
mutated chromosome: only the mutated network's terms are computed).

Per configuration:
1. pools: each network's distinct mappings from the seeded GA's structured seeds
   (ga._seeds: each network's own front per set of PE classes, the priority beam, whole
   networks on one PE) and its random initial population; the front starts from those
   joint mappings and PRODUCT_SAMPLE random combinations of the pools;
2. each generation, for each network in turn: PARENTS of its mappings that appear in the
   front are varied (MUTANTS mutated copies each, and as many two-point crossovers
   between them, with the GA's operators on that network's genes); each resulting
   mapping (new, or already in the pool) is scored beside PARTNERS joint mappings of the
   front with it swapped in, half of them where its parent sits, and the front is
   updated (moocore's non-dominated filter);
3. with the "mobility" window a higher network's dbf depends on the lower network's
   window, so a combination is first scored with a lower bound of it and swept exactly
   only if that optimistic score is not dominated by the front.
A joint space of at most EXACT_PRODUCT_LIMIT mappings is scored whole instead (exact()):
the exact front, as the exhaustive solver's, in about a second per million.
The returned set is the front (every joint mapping in it scored by the same formulas as
evaluate_batch; the schedule re-scores it with the evaluator). Deterministic for a seed:
budgets are in generations; the time limit only stops early. When no combination of the
first pools is schedulable, the caller runs the seeded GA instead (its penalties guide a
search towards schedulability).
"""

from __future__ import annotations

import time

import moocore
import numpy as np

from planner.core.multiapp import NetworkTerms, evaluate_combinations, network_terms
from solvers._evolution import generation_done

PARENTS = 30  # mappings of one network varied per generation
MUTANTS = 6  # mutated copies per parent (plus as many crossovers in all)
PARTNERS = 40  # front members each new mapping is scored beside
PRODUCT_SAMPLE = 20_000  # random combinations of the first pools
EXACT_PRODUCT_LIMIT = 2_000_000  # a joint space this small is scored whole (exact front), ~1-5 s
CHUNK = 100_000  # joint mappings scored at once when scoring a whole space
POOL_LIMIT = 20_000  # a pool larger than this keeps only the mappings the front uses


def _keys(rows: np.ndarray) -> list[bytes]:
    """Hashable keys of mappings, 2 bytes a gene (a pool's dedup set stays small)."""
    return [r.tobytes() for r in np.asarray(rows).astype(np.uint16)]


def _nondominated(objs: np.ndarray) -> np.ndarray:
    return moocore.is_nondominated(objs) if len(objs) else np.zeros(0, dtype=bool)


class _Pools:
    """Each network's candidate mappings and their NetworkTerms, with each mapping's index."""

    def __init__(self, mp, rows_per_network: list[np.ndarray]):
        self.mp = mp
        self.rows = [np.unique(r, axis=0) for r in rows_per_network]
        self.terms: list[NetworkTerms] = [network_terms(mp, a, r) for a, r in enumerate(self.rows)]
        self.pos = [{k: i for i, k in enumerate(_keys(r))} for r in self.rows]
        self.unrunnable: list[set[bytes]] = [set() for _ in self.rows]

    def index(self, a: int, rows: np.ndarray) -> np.ndarray:
        return np.array([self.pos[a][k] for k in _keys(rows)], dtype=np.intp)

    def add(self, a: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pool indices of `rows` (first copies, those that can run), adding the new
        ones; and their positions in `rows`."""
        first = np.sort(np.unique(rows, axis=0, return_index=True)[1])
        keys = _keys(rows[first])
        fresh = [(i, k) for i, k in zip(first, keys) if k not in self.pos[a] and k not in self.unrunnable[a]]
        if fresh:
            new = rows[[i for i, _ in fresh]]
            t = network_terms(self.mp, a, new)
            base = len(self.rows[a])
            ok = np.flatnonzero(t.runs)
            for j, (_, k) in enumerate(fresh):
                if t.runs[j]:
                    self.pos[a][k] = base + int(np.searchsorted(ok, j))
                else:
                    self.unrunnable[a].add(k)
            self.rows[a] = np.concatenate([self.rows[a], new[ok]])
            self.terms[a] = self.terms[a].extend(t.take(ok))
        known = [(i, self.pos[a][k]) for i, k in zip(first, keys) if k in self.pos[a]]
        return np.array([j for _, j in known], dtype=np.intp), np.array([i for i, _ in known], dtype=np.intp)

    def prune(self, front_idx: np.ndarray) -> np.ndarray:
        """Drops the mappings no front member uses from pools over POOL_LIMIT; returns
        front_idx renumbered."""
        front_idx = front_idx.copy()
        for a in range(len(self.rows)):
            if len(self.rows[a]) <= POOL_LIMIT:
                continue
            used = np.unique(front_idx[:, a])
            self.rows[a], self.terms[a] = self.rows[a][used], self.terms[a].take(used)
            self.pos[a] = {k: i for i, k in enumerate(_keys(self.rows[a]))}
            front_idx[:, a] = np.searchsorted(used, front_idx[:, a])
        return front_idx

    def genes(self, idx: np.ndarray) -> np.ndarray:
        return np.concatenate([self.rows[a][idx[:, a]] for a in range(len(self.rows))], axis=1)


class _Search:
    """The search's state: pools, the front (pool indices per network, objectives), its rng."""

    def __init__(self, mp, rng: np.random.Generator, seed_rows: np.ndarray, vary, sub_genomes):
        self.mp, self.rng, self.vary, self.genomes = mp, rng, vary, sub_genomes
        A = len(mp.apps)
        self.pools = _Pools(mp, mp.split(seed_rows))
        self.combos = 0
        idx = np.stack([self.pools.index(a, r) for a, r in enumerate(mp.split(seed_rows))], axis=1)
        sizes = [len(r) for r in self.pools.rows]
        n_rand = min(PRODUCT_SAMPLE, int(np.prod(sizes, dtype=float)))
        idx = np.concatenate([idx, np.stack([rng.integers(0, n, n_rand) for n in sizes], axis=1)])
        objs, ok = _filtered(mp, self.pools, idx, np.empty((0, A + 1)), self.score)
        self.front_idx, self.front_o = _merge(idx[:0], objs[:0], idx[ok], objs[ok])

    def score(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.combos += len(idx)
        return evaluate_combinations(self.mp, self.pools.terms, idx)

    def generation(self) -> None:
        """Every network in turn, each against the front its predecessor just updated."""
        for a in range(len(self.mp.apps)):
            idx, objs = _step(self.mp, self.pools, a, self.front_idx, self.front_o, self.rng, self.vary,
                              self.genomes[a], self.score)
            self.front_idx, self.front_o = _merge(self.front_idx, self.front_o, idx, objs)
        self.front_idx = self.pools.prune(self.front_idx)


def run(mp, rng: np.random.Generator, seed_rows: np.ndarray, generations: int, vary, sub_genomes,
        budget_s: float, clock, progress=None, where=(0, 1), record: bool = False, t0_ms: float | None = None):
    """One configuration. seed_rows: joint mappings to start from (G columns). vary(rows,
    rng, cxpb, mutpb, genome) is the GA's variation; t0_ms: when the configuration's search
    began (history times count from it). Returns (genes, objectives, history, hit the
    time limit, info, evaluations) or None when nothing schedulable was found to start from."""
    t0 = clock.ms if t0_ms is None else t0_ms
    c0 = time.process_time()
    search = _Search(mp, rng, seed_rows, vary, sub_genomes)
    if not len(search.front_o):
        return None
    history, hit, gen = [], False, -1
    for gen in range(generations):
        search.generation()
        if generation_done(gen, generations, search.front_o, search.combos, history if record else None, clock, t0, c0,
                           budget_s, progress, where):
            hit = True
            break
    front_idx, front_o = search.front_idx, search.front_o
    order = np.lexsort(front_o.T[::-1])
    info = {"seeds": int(len(seed_rows)), "restarts": 0, "generations_run": gen + 1,
            "pool_sizes": [int(len(r)) for r in search.pools.rows]}
    return search.pools.genes(front_idx[order]), front_o[order], history, hit, info, search.combos


def exact(mp, rows_per_network: list[np.ndarray], clock, t0_ms: float, record: bool = False):
    """The whole joint space, each network's every mapping in its pool, scored in chunks:
    the exact front, in run()'s return form (None when nothing is schedulable)."""
    c0 = time.process_time()
    pools = _Pools(mp, rows_per_network)
    sizes = [len(r) for r in pools.rows]
    total = int(np.prod(sizes, dtype=np.int64))
    front_idx, front_o = np.zeros((0, len(sizes)), dtype=np.intp), np.zeros((0, len(sizes) + 1))
    scored = 0

    def score(idx):
        nonlocal scored
        scored += len(idx)
        return evaluate_combinations(mp, pools.terms, idx)

    for lo in range(0, total, CHUNK):
        idx = np.stack(np.unravel_index(np.arange(lo, min(total, lo + CHUNK)), sizes), axis=1).astype(np.intp)
        objs, ok = _filtered(mp, pools, idx, front_o, score)
        nd = _nondominated(objs[ok])
        front_idx, front_o = _merge(front_idx, front_o, idx[ok][nd], objs[ok][nd])
    if not len(front_o):
        return None
    history = [{"generation": 0, "elapsed_s": (clock.ms - t0_ms) / 1e3, "cpu_s": time.process_time() - c0,
                "evaluations": scored, "front": front_o.copy()}] if record else []
    order = np.lexsort(front_o.T[::-1])
    info = {"seeds": 0, "restarts": 0, "generations_run": 0, "pool_sizes": sizes, "exact": True}
    return pools.genes(front_idx[order]), front_o[order], history, False, info, scored


def _filtered(mp, pools: _Pools, idx: np.ndarray, front_o: np.ndarray, score):
    """Objectives of the combinations idx and which are schedulable and worth merging.
    With the mobility window: the optimistic bound first, then the exact sweep only for
    the rows it cannot discard (schedulable and not dominated by the front)."""
    if mp.analysis == "executor" or mp.interference_window == "period":
        return score(idx)
    lo, ok = evaluate_combinations(mp, pools.terms, idx, bound=True)
    cand = np.flatnonzero(ok)
    if len(front_o) and len(cand):
        nd = _nondominated(np.concatenate([front_o, lo[cand]]))[len(front_o):]
        # a row equal to a front member is a duplicate at best: dropping it loses nothing
        cand = cand[nd]
    objs = np.full_like(lo, np.inf)
    sched = np.zeros(len(idx), dtype=bool)
    if len(cand):
        objs[cand], sched[cand] = score(idx[cand])
    return objs, sched


def _step(mp, pools: _Pools, a: int, front_idx, front_o, rng, vary, genome, score):
    """New mappings of network a from the front's, each tried beside PARTNERS front members:
    half of them members its parent is in (a small change of the parent lands near
    them), half drawn from the whole front. Returns the schedulable joint mappings so
    made, non-dominated among themselves (pool indices, objectives)."""
    app = mp.apps[a]
    used = np.unique(front_idx[:, a])
    parents = rng.choice(used, size=min(PARENTS, len(used)), replace=False)
    pairs = rng.choice(parents, size=2 * len(parents))
    mutated = vary(np.repeat(pools.rows[a][parents], MUTANTS, axis=0), rng, 0.0, min(1.0, 2.0 / app.n_layers), genome)
    crossed = vary(pools.rows[a][pairs], rng, 1.0, 0.5 / app.n_layers, genome)
    new, where = pools.add(a, np.concatenate([mutated, crossed]))
    if not len(new):
        return front_idx[:0], front_o[:0]
    parent = np.concatenate([np.repeat(parents, MUTANTS), pairs])[where]
    order = np.argsort(front_idx[:, a], kind="stable")
    col = front_idx[order, a]
    lo, hi = np.searchsorted(col, parent, side="left"), np.searchsorted(col, parent, side="right")
    own = PARTNERS // 2
    pick = order[lo[:, None] + (rng.random((len(new), own)) * (hi - lo)[:, None]).astype(np.intp)]
    anywhere = rng.integers(0, len(front_idx), size=(len(new), PARTNERS - own))
    idx = front_idx[np.concatenate([pick, anywhere], axis=1)]
    idx[:, :, a] = new[:, None]
    idx = idx.reshape(-1, len(mp.apps))
    objs, ok = _filtered(mp, pools, idx, front_o, score)
    nd = _nondominated(objs[ok])
    return idx[ok][nd], objs[ok][nd]


def _merge(front_idx, front_o, idx, objs):
    """The front of front + new rows (the new ones filtered among themselves first: most
    are dominated, and the union's filter costs more the more rows it holds)."""
    if not len(objs):
        return front_idx, front_o
    nd = _nondominated(objs)
    all_o = np.concatenate([front_o, objs[nd]])
    keep = _nondominated(all_o)
    return np.concatenate([front_idx, idx[nd]])[keep], all_o[keep]
