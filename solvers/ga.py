"""Kang et al.'s GA scheduler (V.B, VI.B) on DEAP: the chromosome of Fig. 5 (the PE of
every layer, all networks concatenated) run once per CPU configuration; SPEA2
environmental selection as in the paper (NSGA-II as an option); the fitness is
planner.core.multiapp's objectives (1/throughput with the utilisation penalty, and energy;
or every network's response time and the energy, unschedulable mappings penalised).

The whole offspring population is scored by one vectorised call of the evaluator; with
workers > 1 (or a map_fn passed in) chunks go through a pluggable map (e.g. a process
pool's). Variation: two-point crossover; per-gene reassignment to a PE that can run the
layer; a gene copying a DAG neighbour's PE; a run of layers moved to one PE. Half the
initial population are random runs of layers (pipeline-shaped). Beyond the paper, a few
front members are hill-climbed each generation (cut shifts, whole-cluster moves): with
transfers of ~1 ms per CPU-GPU crossing, single-gene changes rarely help a pipeline and
the plain GA stalls above the task-clustering ILP's optimum (bench/multiapp.py measures
both). All randomness comes from numpy Generators seeded by the request (and DEAP's
module RNG, seeded and restored): the same seed and options give the same front. The
returned set is every non-dominated mapping seen.

Strategy "seeded" (the default before "decomposed"; issue 15: >= 99% of the exact front for every seed on any
cost shape) starts each configuration from structured joint mappings (_seeds): each
network's own front per set of PE classes (exact by enumeration when its space is small,
else a chain DP and structured mappings), combined network by network in priority order
keeping the schedulable non-dominated partial mappings (_beam), and every network wholly
on one PE; its first hill-climb cycles through the objectives; after `patience`
generations without a new non-dominated mapping the population restarts (half from the
front, half fresh), and after `restarts` fruitless restarts in a row the configuration
stops early (deterministic: counted in generations). "classic" is the previous GA
exactly (no seeds, no restarts), kept for comparison (bench/multiapp.py).

Strategy "decomposed" (default; issue 14: the best-known front within seconds) applies
to several networks in response-time mode: it starts from the seeded strategy's seeds and
first population and varies one network's mapping at a time, each scored beside many of
the front's mappings of the others by planner.core.multiapp's decomposed evaluator
(solvers.ga_decomposed). A single network, or the throughput mode, runs "seeded"; so
does a configuration where no combination of the seeds is schedulable. Its options:
population (the seeds' first population), generations (one generation varies every
network once), the rest apply to the GA strategies only.

SPEA2 is DEAP's selSPEA2 semantics vectorised (spea2_select, tested index-for-index
against the library); "spea2-deap" calls the library itself (~10x slower per generation).

Options: population (int, 100), generations (int, 150), selection ("spea2" | "spea2-deap" |
"nsga2"), crossover (prob., 0.9), mutation (per-gene prob., default 1.5 / chromosome
length), workers (int, 1), chunks (int, default workers), local_search (int, 2: front
members hill-climbed per generation, the best by the first objective first; 0 = the
paper's plain GA), strategy ("decomposed" | "seeded" | "classic"), patience (int, 20 seeded / 0 classic:
generations without progress before a restart; 0 = never restart or stop early), restarts
(int, 2), network_moves (bool, false: whole-network crossover and PE swaps within one
network; measured no better on the Galaxy S9 benchmark), record_history (bool:
per-generation fronts for benchmarks).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Annotated, Callable, Iterable, Literal

import numpy as np

from planner.core.mapping import ScheduleProblem
from planner.core.multiapp import PENALTY, evaluate_batch, merge_front, pareto_mask
from pydantic import Field

from planner.core.options import StrictOptions, parse_options
from planner.core.procs import die_with_parent
from planner.core.schema import ScheduleRequest
from planner.core.solver import AutoUse, Candidate, MapFn, ScheduleSolution, SolverBase
from planner.core.solver import Capabilities, Progress, Stopwatch
from solvers._evolution import generation_done


class GaOptions(StrictOptions):
    population: Annotated[int, Field(ge=4, le=10_000)] = 100
    generations: Annotated[int, Field(ge=1, le=1_000_000)] = 150
    selection: Literal["spea2", "spea2-deap", "nsga2"] = "spea2"
    crossover: Annotated[float, Field(ge=0, le=1)] = Field(0.9, description="Crossover probability")
    mutation: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, description="Per-gene mutation probability; default 1.5 / chromosome length")
    workers: Annotated[int, Field(ge=1, le=256)] = Field(
        1, description="Evaluation processes of the seeded and classic strategies (decomposed scores in its own process)")
    chunks: Annotated[int, Field(ge=1, le=4096)] | None = Field(None, description="Evaluation chunks; default: workers")
    record_history: bool = False
    local_search: Annotated[int, Field(ge=0, le=1000)] = Field(2, description="Front members improved per generation")
    strategy: Literal["decomposed", "seeded", "classic"] = Field(
        "decomposed", description="decomposed: per-network mappings varied and scored beside the front's others "
        "(several networks, response-time mode; else seeded); seeded: heuristic seeds, restarts on stagnation; "
        "classic: the paper's GA")
    patience: Annotated[int, Field(ge=0, le=1_000_000)] | None = Field(
        None, description="Generations without improvement before a restart; default 20 (seeded), 0 (classic)")
    restarts: Annotated[int, Field(ge=0, le=1000)] = 2
    network_moves: bool = False


OPTIONS = ["population", "generations", "selection", "crossover", "mutation", "workers", "chunks", "record_history",
           "local_search", "strategy", "patience", "restarts", "network_moves"]

ALONE_ENUMERATION_LIMIT = 50_000  # a network whose own mapping space is this small is enumerated for seeds
SEEDS_PER_SUBSET = 8  # members of a network's own front per set of PE classes kept for joint seeds
SEARCH_SHARE = 0.5  # of time_limit_s the search may take: the rest scores the front into entries (500 by
# default, timelines included: seconds) before a job is stopped at the limit plus a short grace
JOINT_SEEDS = 6  # x population: most all-on-one-PE joint seeds sampled
BEAM_WIDTH = 16  # partial joint mappings kept per network placed (_beam)


def _score(problem, genes: np.ndarray) -> np.ndarray:
    return evaluate_batch(problem, genes).objectives


def _classes(k: int):
    from deap import base, creator

    fit, ind = f"KangFitnessMin{k}", f"KangIndividual{k}"
    if not hasattr(creator, fit):
        creator.create(fit, base.Fitness, weights=(-1.0,) * k)
        creator.create(ind, list, fitness=getattr(creator, fit))
    return getattr(creator, ind)


class _Evaluator:
    def __init__(self, problem, map_fn: Callable[[Callable, Iterable], Iterable] | None, chunks: int):
        self.problem, self.map_fn, self.chunks = problem, map_fn, chunks
        self.count = 0

    def __call__(self, genes: np.ndarray, problem=None) -> np.ndarray:
        """Objectives of genes on self.problem (or on `problem`, e.g. one network alone)."""
        self.count += len(genes)
        score = functools.partial(_score, self.problem if problem is None else problem)
        if self.map_fn is None or self.chunks <= 1 or len(genes) < 2 * self.chunks:
            return score(genes)
        return np.concatenate(list(self.map_fn(score, np.array_split(genes, self.chunks))))


def _initial(mp, n: int, rng: np.random.Generator, gen: "_Genome") -> np.ndarray:
    """Single-PE mappings where possible, each layer on its fastest PE, then half random
    runs of layers on random PEs (pipeline-shaped, few transfers) and half uniform."""
    G = mp.n_genes
    seeds = []
    feas = np.concatenate([a.feasible for a in mp.apps])
    for p in range(mp.n_pes):
        if feas[:, p].all():
            seeds.append(np.full(G, p))
    seeds.append(np.concatenate([np.argmin(a.exec_time_ms, axis=1) for a in mp.apps]))
    rand = gen.table[np.arange(G)[None, :], (rng.random((n, G)) * gen.counts[None, :]).astype(np.intp)]
    for k in range(n // 2):
        row = rand[k]
        for lo, hi in gen.spans:
            cuts = np.sort(rng.choice(np.arange(lo + 1, hi), size=min(hi - lo - 1, int(rng.integers(0, 2 * mp.n_pes))),
                                      replace=False)) if hi - lo > 1 else np.array([], dtype=int)
            for a, b in zip([lo, *cuts], [*cuts, hi]):
                p = int(rng.integers(mp.n_pes))
                seg = np.arange(a, b)
                row[seg[feas[seg, p]]] = p
    return np.concatenate([np.array(seeds, dtype=np.intp).reshape(-1, G), rand])[:n]


def _alone(mp, a: int):
    """Network a by itself on this configuration (no other network to interfere)."""
    return mp if len(mp.apps) == 1 else dataclasses.replace(mp, apps=(mp.apps[a],))


def _spread(rows: np.ndarray, k: int) -> np.ndarray:
    """At most k rows, evenly spaced (rows are sorted by the first objective)."""
    return rows if len(rows) <= k else rows[np.unique(np.linspace(0, len(rows) - 1, k).round().astype(int))]


def _pe_classes(mp) -> np.ndarray:
    """(P,) class of each PE: interchangeable PEs (same cluster, same core count) share one."""
    keys: dict[tuple, int] = {}
    return np.array([keys.setdefault((pe.device_id, pe.cores, pe.is_cpu), len(keys)) for pe in mp.pes], dtype=np.intp)


def _chain_front(mp, a: int, k: int = 64, classes: frozenset | None = None) -> np.ndarray:
    """Network a's (time, energy) trade-offs as a chain in layer order: a bi-objective
    shortest path over (layer, PE class) with Pareto label sets (thinned to k per state),
    one representative PE per class of interchangeable PEs. Exact for a chain on one PE
    of each class; for a DAG the transfers of edges that skip a layer are left out, so
    these are candidates, each scored exactly by the caller."""
    app = mp.apps[a]
    L = app.n_layers
    cls = _pe_classes(mp)
    reps = [int(np.flatnonzero(cls == c)[0]) for c in range(cls.max() + 1) if classes is None or c in classes]
    edge = {(int(u), int(v)): e for e, (u, v) in enumerate(app.edges)}
    t_x, e_x = app.exec_time_ms, app.exec_energy_mj
    labels = {}  # PE -> (time (n,), energy (n,), genes (n, i+1))
    for p in reps:
        if np.isfinite(t_x[0, p]):
            labels[p] = (np.array([t_x[0, p]]), np.array([e_x[0, p]]), np.array([[p]], dtype=np.intp))
    for i in range(1, L):
        e = edge.get((i - 1, i))
        nxt = {}
        for q in reps:
            if not np.isfinite(t_x[i, q]):
                continue
            ts, es, gs = [], [], []
            for p, (t, en, g) in labels.items():
                tt = t + t_x[i, q] + (app.edge_time_ms[e, p, q] if e is not None else 0.0)
                ee = en + e_x[i, q] + (app.edge_energy_mj[e, p, q] if e is not None else 0.0)
                ts.append(tt)
                es.append(ee)
                gs.append(np.concatenate([g, np.full((len(g), 1), q, dtype=np.intp)], axis=1))
            if not ts:
                continue
            t, en, g = np.concatenate(ts), np.concatenate(es), np.concatenate(gs)
            order = np.lexsort((en, t))
            t, en, g = t[order], en[order], g[order]
            keep = en < np.concatenate([[np.inf], np.minimum.accumulate(en)[:-1]])  # 2-D Pareto filter
            t, en, g = t[keep], en[keep], g[keep]
            idx = _spread(np.arange(len(t)), k)
            nxt[q] = (t[idx], en[idx], g[idx])
        labels = nxt
    if not labels:
        return np.empty((0, L), dtype=np.intp)
    return np.concatenate([g for _, _, g in labels.values()])


def _network_front(mp, a: int, evaluate_alone) -> np.ndarray:
    """Network a's own front (response time or period, energy) on this configuration:
    exact by enumeration when its space is small, else over structured mappings (each
    layer on its fastest / least-energy PE, everything that can on one PE, two stages
    p -> q at every cut, the chain DP's trade-offs on each set of PE classes), each run
    through the evaluator alone. Kept: the front within each set of PE classes (the
    network on the CPU alone, on the GPU alone, on both...), since what is best alone is
    often unschedulable beside the others (a low-priority network on a shared
    non-preemptive GPU) while a dominated alone mapping fits."""
    from solvers.exhaustive import count_mappings, decode

    app = mp.apps[a]
    feas = app.feasible
    L, P = feas.shape
    choices = [np.flatnonzero(r) for r in feas]
    n = count_mappings(choices)
    if n <= ALONE_ENUMERATION_LIMIT:
        rows = decode(choices, np.arange(n, dtype=np.int64))
    else:
        fast = np.argmin(app.exec_time_ms, axis=1)
        green = np.argmin(np.where(feas, app.exec_energy_mj, np.inf), axis=1)
        rows = [fast, green]
        for p in range(P):
            rows += [np.where(feas[:, p], p, fast), np.where(feas[:, p], p, green)]
            for q in range(P):
                if q != p:
                    for c in range(1, L):
                        r = np.where(feas[:, p], p, fast)
                        r[c:] = np.where(feas[c:, q], q, fast[c:])
                        rows.append(r)
        cls = _pe_classes(mp)
        subsets = _class_subsets(int(cls.max()) + 1)
        rows = np.unique(np.concatenate([np.array(rows, dtype=np.intp)] + [_chain_front(mp, a, classes=c) for c in subsets]),
                         axis=0)
    objs = evaluate_alone(_alone(mp, a), rows)
    ok = np.isfinite(objs).all(axis=1)
    rows, objs = rows[ok], objs[ok]
    cls = _pe_classes(mp)
    used = np.zeros((len(rows), int(cls.max()) + 1), dtype=bool)  # which PE classes each mapping uses
    used[np.repeat(np.arange(len(rows)), L), cls[rows].ravel()] = True
    out = []
    for sub in _class_subsets(used.shape[1]):  # the front within each set of PE classes
        inside = np.flatnonzero(~used[:, [c for c in range(used.shape[1]) if c not in sub]].any(axis=1))
        if len(inside):
            f = inside[pareto_mask(objs[inside])]
            out.append(_spread(f[np.lexsort(objs[f].T[::-1])], SEEDS_PER_SUBSET))
    keep = np.unique(np.concatenate(out)) if out else np.zeros(0, dtype=np.intp)
    return rows[keep[np.lexsort(objs[keep].T[::-1])]]


def _class_subsets(n: int) -> list[frozenset]:
    """Non-empty sets of PE classes (all of them up to 4 classes; else singletons and all)."""
    if n <= 4:
        return [frozenset(c for c in range(n) if m >> c & 1) for m in range(1, 2 ** n)]
    return [frozenset([c]) for c in range(n)] + [frozenset(range(n))]


def _relabel(rows: np.ndarray, gen: "_Genome", lo: int, hi: int) -> np.ndarray:
    """rows (one network's genes) with their twin PEs rotated every way: the same own
    costs, different neighbours (which other network shares which core)."""
    out = [rows]
    size = max((len(g) for g in gen.twin_groups), default=1)
    cols = np.arange(hi - lo)[None, :]
    for r in range(1, size):
        perm = np.arange(gen.n_pes)
        for g in gen.twin_groups:
            perm[g] = np.roll(g, -r)
        block = perm[rows]
        out.append(np.where(gen.feasible[lo:hi][cols, block], block, rows))
    return np.unique(np.concatenate(out), axis=0)


def _beam(mp, gen: "_Genome", fronts: list[np.ndarray], evaluate, width: int) -> np.ndarray:
    """Networks added one at a time, highest priority first: every kept partial mapping
    x every (relabelled) member of the next network's own front, scored exactly on the
    networks placed so far (a lower-priority network cannot delay a higher one except by
    blocking a non-preemptive PE, which the score includes); the non-dominated partial
    mappings (thinned to `width` along energy, each objective's best kept) go on. Own
    fronts ignore interference, so most of their raw combinations miss a deadline; this
    keeps the schedulable ones. Returns the last level's non-dominated joint mappings."""
    order = mp.priority_rank
    beam = np.empty((1, 0), dtype=np.intp)
    placed: list[int] = []
    rows = beam
    for a in order:
        lo, hi = gen.spans[a]
        cand = _relabel(fronts[a], gen, lo, hi)
        rows = np.concatenate([np.repeat(beam, len(cand), axis=0), np.tile(cand, (len(beam), 1))], axis=1)
        placed.append(a)
        sub = dataclasses.replace(mp, apps=tuple(mp.apps[i] for i in placed))
        objs = evaluate(sub, rows)
        ok = np.isfinite(objs).all(axis=1)
        rows, objs = rows[ok], objs[ok]
        if not len(rows):
            return np.empty((0, mp.n_genes), dtype=np.intp)
        keep = np.flatnonzero(pareto_mask(objs))
        rows, objs = rows[keep], objs[keep]
        pick = set(_spread(np.argsort(objs[:, -1], kind="stable"), width).tolist())
        pick |= {int(np.argmin(objs[:, j])) for j in range(objs.shape[1])}
        beam = rows[sorted(pick)]
    # columns are in priority order; back to the request's order
    starts = np.cumsum([0] + [mp.apps[a].n_layers for a in placed])
    cols = np.concatenate([np.arange(starts[placed.index(a)], starts[placed.index(a) + 1]) for a in range(len(mp.apps))])
    return rows[:, cols]


def _seeds(mp, gen: "_Genome", rng: np.random.Generator, n: int, evaluate) -> np.ndarray:
    """Joint mappings built from what each network does best by itself: each network's
    own front (_network_front), combined network by network in priority order (_beam),
    and every network wholly on one PE (each combination of PEs, or n at random), also
    with the networks spread over twin CPU PEs (network a's twins rotated by a). Robust
    to the cost shape: whichever region of the joint front a network's extremes lead to
    is seeded, for every CPU configuration (the GA runs once per configuration)."""
    A = len(mp.apps)
    fronts = [_network_front(mp, a, evaluate) for a in range(A)]
    out = []
    if min(len(f) for f in fronts) > 0:
        out.append(_beam(mp, gen, fronts, evaluate, BEAM_WIDTH))
    feas = gen.feasible
    fast = np.concatenate([np.argmin(app.exec_time_ms, axis=1) for app in mp.apps])
    one = np.stack([np.where(feas[:, p], p, fast) for p in range(mp.n_pes)])  # (P, G)
    combos = mp.n_pes ** A
    pick = (np.array(np.meshgrid(*[np.arange(mp.n_pes)] * A, indexing="ij")).reshape(A, -1).T if combos <= n
            else rng.integers(0, mp.n_pes, size=(n, A)))
    rows = np.empty((len(pick), mp.n_genes), dtype=np.intp)
    for a, (lo, hi) in enumerate(gen.spans):
        rows[:, lo:hi] = one[pick[:, a], lo:hi]
    if gen.twin_groups and A > 1:
        spread = rows.copy()
        for a, (lo, hi) in enumerate(gen.spans):
            perm = np.arange(mp.n_pes)
            for g in gen.twin_groups:
                perm[g] = np.roll(g, -a)
            block = perm[rows[:, lo:hi]]
            ok = feas[np.arange(lo, hi)[None, :], block]
            spread[:, lo:hi] = np.where(ok, block, rows[:, lo:hi])
        rows = np.concatenate([rows, spread])
    out.append(rows)
    return np.unique(np.concatenate(out), axis=0)


class _Genome:
    """What variation needs to know about the chromosome: the PEs each gene may take, its
    DAG neighbours (their PEs make contiguous clusters, Fig. 3/8) and the networks' spans."""

    def __init__(self, mp):
        choices = mp.gene_choices()
        G = mp.n_genes
        self.counts = np.array([len(c) for c in choices])
        self.table = np.zeros((G, int(self.counts.max())), dtype=np.intp)
        for g, c in enumerate(choices):
            self.table[g, :len(c)] = c
        self.feasible = np.concatenate([a.feasible for a in mp.apps])
        nbrs = []
        for off, app in zip(mp.offsets, mp.apps):
            for i in range(app.n_layers):
                nbrs.append([off + j for j in (*app.preds[i], *app.succs[i])] or [off + i])
        self.nb_counts = np.array([len(x) for x in nbrs])
        self.nb_table = np.zeros((G, int(self.nb_counts.max())), dtype=np.intp)
        for g, x in enumerate(nbrs):
            self.nb_table[g, :len(x)] = x
        self.spans = [(int(mp.offsets[a]), int(mp.offsets[a + 1])) for a in range(len(mp.apps))]
        self.n_pes = mp.n_pes
        groups: dict[tuple, list[int]] = {}
        for p, pe in enumerate(mp.pes):  # interchangeable logical PEs: same cluster, same core count
            groups.setdefault((pe.device_id, pe.cores, pe.is_cpu), []).append(p)
        self.twins = np.arange(mp.n_pes)
        self.twin_groups = [g for g in groups.values() if len(g) > 1]
        for g in self.twin_groups:
            self.twins[g] = g[0]


def _vary(parents: np.ndarray, rng: np.random.Generator, cxpb: float, mutpb: float, gen: _Genome,
          network_moves: bool = False) -> np.ndarray:
    """Two-point crossover, then three mutations: a gene to a random PE that can run it, a
    gene to the PE of one of its DAG neighbours, and (one child in four) a run of layers of
    one network moved to one PE. network_moves adds the multi-network operators: half the
    crossovers swap whole networks' mappings (a good mapping of one network combines with
    a good one of another), and one child in four has one network's use of two PEs
    swapped (for twin CPU PEs this changes only who interferes with whom)."""
    n, G = parents.shape
    kids = parents.copy()
    A = len(gen.spans)
    if G > 1:
        for k in range(0, n - 1, 2):
            if rng.random() < cxpb:
                if network_moves and A > 1 and rng.random() < 0.5:
                    take = rng.random(A) < 0.5
                    for a in np.flatnonzero(take):
                        lo, hi = gen.spans[a]
                        kids[k, lo:hi], kids[k + 1, lo:hi] = parents[k + 1, lo:hi], parents[k, lo:hi]
                    continue
                a, b = sorted(rng.choice(G + 1, size=2, replace=False))
                kids[k, a:b], kids[k + 1, a:b] = parents[k + 1, a:b], parents[k, a:b]
    cols = np.arange(G)[None, :]
    uniform = rng.random((n, G)) < mutpb
    new = gen.table[cols, (rng.random((n, G)) * gen.counts[None, :]).astype(np.intp)]
    kids = np.where(uniform, new, kids)
    follow = rng.random((n, G)) < mutpb
    nb = gen.nb_table[cols, (rng.random((n, G)) * gen.nb_counts[None, :]).astype(np.intp)]
    nb_pe = np.take_along_axis(kids, nb, axis=1)
    ok = gen.feasible[cols, nb_pe]
    kids = np.where(follow & ok, nb_pe, kids)
    for k in np.flatnonzero(rng.random(n) < 0.25):
        lo, hi = gen.spans[int(rng.integers(len(gen.spans)))]
        a = int(rng.integers(lo, hi))
        b = min(hi, a + 1 + int(rng.integers(max(1, (hi - lo) // 4))))
        p = int(rng.integers(gen.n_pes))
        seg = np.arange(a, b)
        seg = seg[gen.feasible[seg, p]]
        kids[k, seg] = p
    if network_moves:
        for k in np.flatnonzero(rng.random(n) < 0.25):
            lo, hi = gen.spans[int(rng.integers(A))]
            row = kids[k, lo:hi]
            p = int(row[int(rng.integers(hi - lo))])
            twins = [q for q in range(gen.n_pes) if q != p and gen.twins[q] == gen.twins[p]]
            q = int(rng.choice(twins)) if twins and rng.random() < 0.5 else int(rng.integers(gen.n_pes))
            if q == p:
                continue
            feas = gen.feasible[lo:hi]
            on_p, on_q = (row == p) & feas[:, q], (row == q) & feas[:, p]
            row[on_p], row[on_q] = q, p
    return kids


def _boundary_moves(genes: np.ndarray, gen: _Genome) -> np.ndarray:
    """Every mapping one cut-shift away: a layer next to a cluster boundary moved to the PE
    of a DAG neighbour. Transfers make most single-layer moves worse (two new boundaries),
    so pipelines improve by sliding boundaries; all of them cost one batch evaluation."""
    nb_pe = genes[gen.nb_table]  # (G, maxdeg)
    valid = (np.arange(gen.nb_table.shape[1])[None, :] < gen.nb_counts[:, None]) & (nb_pe != genes[:, None])
    valid &= gen.feasible[np.arange(len(genes))[:, None], nb_pe]
    g_idx, k_idx = np.nonzero(valid)
    if len(g_idx) == 0:
        return np.empty((0, len(genes)), dtype=genes.dtype)
    pairs = np.unique(np.stack([g_idx, nb_pe[g_idx, k_idx]], axis=1), axis=0)
    out = np.repeat(genes[None, :], len(pairs), axis=0)
    out[np.arange(len(pairs)), pairs[:, 0]] = pairs[:, 1]
    return out


def _cluster_moves(genes: np.ndarray, gen: _Genome) -> np.ndarray:
    """Every run of consecutive layers on one PE moved whole to each other PE that can run it."""
    out = []
    for lo, hi in gen.spans:
        starts = [lo] + [i for i in range(lo + 1, hi) if genes[i] != genes[i - 1]]
        for a, b in zip(starts, [*starts[1:], hi]):
            for p in range(gen.n_pes):
                if p != genes[a] and gen.feasible[a:b, p].all():
                    row = genes.copy()
                    row[a:b] = p
                    out.append(row)
    return np.array(out, dtype=genes.dtype).reshape(-1, len(genes))


def _climb(genes, objs, gen: _Genome, evaluate, target: int | None, steps: int = 8):
    """Steepest descent over cut shifts and cluster moves: while a neighbour dominates (or,
    with a target objective, has a lower value of it), move to the best one. None if none does."""
    moved = False
    for _ in range(steps):
        cand = np.concatenate([_boundary_moves(genes, gen), _cluster_moves(genes, gen)])
        if not len(cand):
            break
        co = evaluate(cand)
        if target is not None:
            better = co[:, target] < objs[target] - 1e-12
        else:
            better = (co <= objs).all(axis=1) & (co < objs).any(axis=1)
        if not better.any():
            break
        keys = co[better].T[::-1] if target is None else np.vstack([co[better].T[::-1], co[better][:, target]])
        j = np.flatnonzero(better)[np.lexsort(keys)[0]]
        genes, objs, moved = cand[j], co[j], True
    return (genes, objs) if moved else (None, None)


def spea2_select(objs: np.ndarray, k: int) -> list[int]:
    """DEAP's tools.selSPEA2 (Zitzler et al. 2001, as DEAP implements it: raw fitness from
    strengths, density 1 / (d_k^2 + 2) with DEAP's upper-triangle distances, truncation by
    lexicographically smallest sorted distances, ties to the lower index), vectorised
    with numpy: the same indices in the same order (tests assert it), at a fraction of
    the pure-Python O(N^2) cost, which otherwise dominates a generation."""
    f = np.asarray(objs, dtype=float)
    N, M = f.shape
    # a dominates b (minimisation, wvalues = -values): no worse everywhere, better somewhere
    le = (f[:, None, :] <= f[None, :, :]).all(axis=2)
    lt = (f[:, None, :] < f[None, :, :]).any(axis=2)
    dom = le & lt  # dom[i, j]: i dominates j
    strength = dom.sum(axis=1)
    raw = (dom * strength[:, None]).sum(axis=0)  # sum of strengths of the dominators
    chosen = [i for i in range(N) if raw[i] < 1]
    diff = f[:, None, :] - f[None, :, :]
    dist = np.zeros((N, N))
    for m in range(M):  # same summation order as DEAP
        dist = dist + diff[:, :, m] * diff[:, :, m]
    if len(chosen) < k:
        upper = np.triu(dist, 1)  # DEAP measures i's distances to j > i only (zeros elsewhere)
        kth = np.sort(upper, axis=1)[:, int(math.floor(math.sqrt(N)))]
        fits = raw + 1.0 / (kth + 2.0)
        rest = [i for i in range(N) if raw[i] >= 1]
        rest.sort(key=lambda i: (fits[i], i))
        return chosen + rest[: k - len(chosen)]
    if len(chosen) == k:
        return chosen
    idx = np.array(chosen)
    D = dist[np.ix_(idx, idx)]
    alive = np.ones(len(idx), dtype=bool)
    size = len(idx)
    while size > k:
        live = np.flatnonzero(alive)
        sub = D[np.ix_(live, live)]
        np.fill_diagonal(sub, np.inf)
        rows = np.sort(sub, axis=1)[:, : size - 1]
        order = np.lexsort(rows.T[::-1])  # stable: ties keep the lower index
        alive[live[order[0]]] = False
        size -= 1
    return [int(i) for i in idx[alive]]


def _seeded_start(mp, genome, rng, evaluate, pop_n: int, pop_g: np.ndarray, pop_o: np.ndarray,  # noqa: ANN001
                  front_g: np.ndarray, front_o: np.ndarray) -> tuple:
    """Every seed (_seeds) scored and merged into the front; half the first population
    becomes seeds spread along the front's first objective. Returns the population, the
    front and the number of seeds."""
    seeds = _seeds(mp, genome, rng, JOINT_SEEDS * pop_n, lambda sub, g: evaluate(g, sub))
    seed_o = evaluate(seeds)
    kf, kk = merge_front(front_o, seed_o)
    front_g = np.concatenate([front_g[kf], seeds[kk]])
    front_o = np.concatenate([front_o[kf], seed_o[kk]])
    order = np.lexsort(front_o.T[::-1])
    take = _spread(order, pop_n // 2)
    pop_g = np.concatenate([front_g[take], pop_g[: pop_n - len(take)]])
    pop_o = np.concatenate([front_o[take], pop_o[: pop_n - len(take)]])
    return pop_g, pop_o, front_g, front_o, len(seeds)


class GaScheduler(SolverBase):
    name = "ga"
    options_model = GaOptions
    capabilities = Capabilities(
        objectives=frozenset({"throughput", "response_time"}),
        constraints=frozenset({"devices", "cpu_utilisation_cap", "period_ms", "memory"}),
        exact=False,
        graph="dag",
        fast=False,
        description="Kang's GA (DEAP, SPEA2 or NSGA-II): Pareto set of joint mappings, seeded and reproducible",
        kind="schedule",
    )
    auto = AutoUse(rank=1, because="the GA searches the space")  # any size: auto's fallback

    def solve(self, problem: ScheduleProblem, request: ScheduleRequest, progress: Progress | None = None,
              map_fn: MapFn | None = None) -> ScheduleSolution:
        opts = parse_options(self.options_model, request.options)
        pop_n, gens, selection, cxpb = opts.population, opts.generations, opts.selection, opts.crossover
        mutpb_opt = -1.0 if opts.mutation is None else opts.mutation
        workers, record, local = opts.workers, opts.record_history, opts.local_search
        chunks = opts.chunks or workers
        strategy = opts.strategy
        seeded = strategy == "seeded"
        patience = opts.patience if opts.patience is not None else (0 if strategy == "classic" else 20)
        restarts, network_moves = opts.restarts, opts.network_moves
        if selection == "nsga2" and pop_n % 4:
            pop_n += 4 - pop_n % 4  # NSGA-II's tournament pairs by fours

        clock = Stopwatch()
        pool = None
        if map_fn is None and workers > 1:
            pool = ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent)  # no orphan on cancel
            map_fn = pool.map
        py_state = random.getstate()
        random.seed(request.seed)  # DEAP's helpers draw from the module RNG
        try:
            cands, per_config, history, evals, stopped = [], [], [], 0, False
            n_cfg = len(problem.configs)
            search_s = request.time_limit_s * SEARCH_SHARE
            not_searched = []
            for ci, mp in enumerate(problem.configs):
                left_s = search_s - clock.ms / 1e3
                if ci > 0 and left_s < clock.ms / 1e3 / ci:  # the next would end past the search's share (a
                    # configuration takes its seeds and a generation however small its budget): anytime, the
                    # front so far is the answer, not a job stopped at the limit
                    not_searched = [c.config_dict() for c in problem.configs[ci:]]
                    stopped = True
                    break
                budget_s = max(0.0, left_s) / (n_cfg - ci)
                rng = np.random.default_rng([request.seed, ci])
                ev = _Evaluator(mp, map_fn, chunks)
                out = None
                if strategy == "decomposed" and mp.mode == "response_time" and len(mp.apps) > 1:
                    out = self._run_decomposed(mp, rng, ev, pop_n, gens, budget_s, record, clock, progress, (ci, n_cfg))
                if out is None:
                    out = self._run(mp, rng, ev, pop_n, gens, selection, cxpb, mutpb_opt, local, budget_s, record, clock,
                                    progress, (ci, n_cfg), seeded or strategy == "decomposed", patience, restarts,
                                    network_moves)
                genes, objs, hist, hit, info = out
                evals += ev.count
                stopped |= hit
                cands += [Candidate(ci, tuple(row)) for row in genes.tolist()]
                ok = (objs < PENALTY).all(axis=1)
                per_config.append({
                    "cpu_config": mp.config_dict(),
                    "front_size": int(len(genes)),
                    "schedulable": int(ok.sum()),
                    "best_first_objective": float(objs[ok, 0].min()) if ok.any() else None,
                    "evaluations": ev.count,
                    **info,
                })
                for h in hist:
                    h["config"] = ci
                history += hist
        finally:
            random.setstate(py_state)
            if pool is not None:
                pool.shutdown()
        best = [r["best_first_objective"] for r in per_config if r["best_first_objective"] is not None]
        notes = []
        if stopped:
            notes.append("stopped by the time limit before the last generation: the front depends on machine speed")
        if not_searched:
            notes.append(f"time limit: {len(not_searched)} of {n_cfg} CPU configurations not searched "
                         "(details.configs_not_searched); raise time_limit_s to search them")
        status = "not_proven" if stopped or not best else "feasible"
        if not best:
            notes.append("no schedulable mapping found (not a proof that none exists)")
        return ScheduleSolution(
            cands, status, objective=min(best) if best else None, wall_time_ms=clock.ms, evaluations=evals,
            notes=notes, details={"per_config": per_config, "selection": selection, "population": pop_n, "generations": gens,
                     "strategy": strategy, "patience": patience, "restarts": restarts, "network_moves": network_moves,
                     "configs_not_searched": not_searched, "search_s": search_s},
            history=history if record else None,
        )

    def _run_decomposed(self, mp, rng, evaluate, pop_n, gens, budget_s, record, clock, progress, where):
        """The decomposed strategy (solvers.ga_decomposed) from the seeded strategy's seeds and
        initial population, or, where the joint space has at most EXACT_PRODUCT_LIMIT
        mappings, that whole space scored by the decomposed evaluator (the exact front);
        None when nothing schedulable was found to start from."""
        from solvers import ga_decomposed

        from solvers.exhaustive import count_mappings, decode

        t0 = clock.ms
        choices = [[np.flatnonzero(r) for r in app.feasible] for app in mp.apps]
        sizes = [count_mappings(c) for c in choices]
        if math.prod(sizes) <= ga_decomposed.EXACT_PRODUCT_LIMIT and max(sizes) <= ALONE_ENUMERATION_LIMIT:  # exactly
            out = ga_decomposed.exact(mp, [decode(c, np.arange(n)) for c, n in zip(choices, sizes)], clock, t0, record)
        else:
            genome = _Genome(mp)
            start = np.concatenate([_seeds(mp, genome, rng, JOINT_SEEDS * pop_n, lambda sub, g: evaluate(g, sub)),
                                    _initial(mp, pop_n, rng, genome)])
            genomes = [_Genome(_alone(mp, a)) for a in range(len(mp.apps))]
            out = ga_decomposed.run(mp, rng, start, gens, _vary, genomes, budget_s, clock, progress, where, record,
                                    t0_ms=t0)
        if out is None:
            return None
        genes, objs, history, hit, info, combos = out
        evaluate.count += combos
        info["joint_mappings_scored"] = combos
        return genes, objs, history, hit, info

    def _run(self, mp, rng, evaluate, pop_n, gens, selection, cxpb, mutpb_opt, local, budget_s, record, clock, progress,
             where, seeded=False, patience=0, restarts=0, network_moves=False):
        """One configuration. seeded: the population starts from _seeds (every seed scored and
        kept in the front) and the first hill-climb cycles through the objectives (each
        network's response time in turn, then energy: every extreme of the front is pushed). patience: after that many
        generations without a new non-dominated mapping the population restarts from the
        front and fresh random mappings; after `restarts` fruitless restarts in a row the
        search stops (it has converged; budgets are in generations, so this is deterministic)."""
        from deap import tools

        n_obj = 2 if mp.mode == "throughput" else len(mp.apps) + 1
        Ind = _classes(n_obj)
        G = mp.n_genes
        genome = _Genome(mp)
        mutpb = mutpb_opt if mutpb_opt >= 0 else min(1.0, 1.5 / G)
        t0 = clock.ms

        def wrap(genes: np.ndarray, objs: np.ndarray) -> list:
            out = []
            for row, o in zip(genes, objs):
                ind = Ind(row.tolist())
                ind.fitness.values = tuple(float(x) for x in o)
                out.append(ind)
            return out

        c0 = time.process_time()
        pop_g = _initial(mp, pop_n, rng, genome)
        pop_o = evaluate(pop_g)
        keep = pareto_mask(pop_o)
        front_g, front_o = pop_g[keep], pop_o[keep]
        n_seeds = 0
        if seeded:
            pop_g, pop_o, front_g, front_o, n_seeds = _seeded_start(mp, genome, rng, evaluate, pop_n,
                                                                    pop_g, pop_o, front_g, front_o)
        arch_g, arch_o = pop_g[:0], pop_o[:0]
        if selection == "nsga2":
            population = tools.selNSGA2(wrap(pop_g, pop_o), pop_n)
        history = []
        hit = False
        quiet, fruitless, n_restarts, improved = 0, 0, 0, False
        for gen in range(gens):
            if selection == "nsga2":
                parents = np.array(tools.selTournamentDCD(population, pop_n), dtype=np.intp)
            else:  # SPEA2: environmental selection into the archive, mating from the archive
                union_g = np.concatenate([pop_g, arch_g])
                union_o = np.concatenate([pop_o, arch_o])
                if selection == "spea2":
                    sel = spea2_select(union_o, pop_n)
                else:
                    inds = wrap(union_g, union_o)
                    pos = {id(ind): i for i, ind in enumerate(inds)}
                    sel = [pos[id(ind)] for ind in tools.selSPEA2(inds, pop_n)]
                arch_g, arch_o = union_g[sel], union_o[sel]
                parents = arch_g[rng.integers(0, len(arch_g), size=pop_n)]
            kids = _vary(parents, rng, cxpb, mutpb, genome, network_moves=network_moves)
            kid_o = evaluate(kids)
            if local > 0 and len(front_g):  # hill-climb a few front members with cut shifts and cluster moves
                best = int(np.argmin(front_o[:, 0]))
                picks = [best] + [int(i) for i in rng.integers(0, len(front_g), size=local - 1)]
                for k, i in enumerate(picks):
                    target = (gen % n_obj if seeded else 0) if k == 0 else None
                    g, o = _climb(front_g[i], front_o[i], genome, evaluate, target)
                    if g is not None:
                        kids = np.concatenate([kids, g[None, :]])
                        kid_o = np.concatenate([kid_o, o[None, :]])
            kf, kk = merge_front(front_o, kid_o)
            front_g = np.concatenate([front_g[kf], kids[kk]])
            front_o = np.concatenate([front_o[kf], kid_o[kk]])
            if selection == "nsga2":
                population = tools.selNSGA2(population + wrap(kids, kid_o), pop_n)
            else:
                pop_g, pop_o = kids, kid_o
            quiet = 0 if kk.any() else quiet + 1
            improved |= bool(kk.any())
            restart = patience > 0 and quiet >= patience
            if restart:  # a restart is fruitless when nothing new was found after it
                fruitless = fruitless + 1 if n_restarts and not improved else 0
            if generation_done(gen, gens, front_o, evaluate.count, history if record else None, clock, t0, c0,
                               budget_s, progress, where):
                hit = True
                break
            if restart:
                if fruitless >= restarts:
                    break  # converged: `restarts` restarts in a row found nothing new
                n_restarts += 1
                quiet, improved = 0, False
                fresh = _initial(mp, pop_n - pop_n // 2, rng, genome)
                old = front_g[rng.integers(0, len(front_g), size=pop_n // 2)]
                pop_g = np.concatenate([old, fresh])
                pop_o = evaluate(pop_g)
                arch_g, arch_o = pop_g[:0], pop_o[:0]
                if selection == "nsga2":
                    population = tools.selNSGA2(wrap(pop_g, pop_o), pop_n)
        fin = np.isfinite(front_o).all(axis=1)
        info = {"seeds": n_seeds, "restarts": n_restarts, "generations_run": gen + 1 if gens else 0}
        return front_g[fin], front_o[fin], history, hit, info


SOLVERS = [GaScheduler()]
