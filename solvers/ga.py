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

SPEA2 is DEAP's selSPEA2 semantics vectorised (spea2_select, tested index-for-index
against the library); "spea2-deap" calls the library itself (~10x slower per generation).

Options: population (int, 100), generations (int, 150), selection ("spea2" | "spea2-deap" |
"nsga2"), crossover (prob., 0.9), mutation (per-gene prob., default 1.5 / chromosome
length), workers (int, 1), chunks (int, default workers), local_search (int, 2: front
members hill-climbed per generation, the best by the first objective first; 0 = the
paper's plain GA), record_history (bool: per-generation fronts for benchmarks).
"""

from __future__ import annotations

import functools
import math
import random
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable

import numpy as np

from planner.core.multiapp import PENALTY, evaluate_batch, merge_front, pareto_mask
from planner.core.options import GaOptions, parse_options
from planner.core.procs import die_with_parent
from planner.core.solver import Candidate, ScheduleSolution
from planner.core.solver import Capabilities, Progress, Stopwatch

OPTIONS = ["population", "generations", "selection", "crossover", "mutation", "workers", "chunks", "record_history",
           "local_search"]


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

    def __call__(self, genes: np.ndarray) -> np.ndarray:
        self.count += len(genes)
        score = functools.partial(_score, self.problem)
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


def _vary(parents: np.ndarray, rng: np.random.Generator, cxpb: float, mutpb: float, gen: _Genome) -> np.ndarray:
    """Two-point crossover, then three mutations: a gene to a random PE that can run it, a
    gene to the PE of one of its DAG neighbours, and (one child in four) a run of layers of
    one network moved to one PE."""
    n, G = parents.shape
    kids = parents.copy()
    if G > 1:
        for k in range(0, n - 1, 2):
            if rng.random() < cxpb:
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


def _climb(genes, objs, gen: _Genome, evaluate, first_only: bool, steps: int = 8):
    """Steepest descent over cut shifts and cluster moves: while a neighbour dominates (or,
    first_only, has a lower first objective), move to the best one. None if none does."""
    moved = False
    for _ in range(steps):
        cand = np.concatenate([_boundary_moves(genes, gen), _cluster_moves(genes, gen)])
        if not len(cand):
            break
        co = evaluate(cand)
        if first_only:
            better = co[:, 0] < objs[0] - 1e-12
        else:
            better = (co <= objs).all(axis=1) & (co < objs).any(axis=1)
        if not better.any():
            break
        j = np.flatnonzero(better)[np.lexsort(co[better].T[::-1])[0]]
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


class GaScheduler:
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

    def solve(self, problem, request, progress: Progress | None = None, map_fn=None) -> ScheduleSolution:
        opts = parse_options(self.options_model, request.options)
        pop_n, gens, selection, cxpb = opts.population, opts.generations, opts.selection, opts.crossover
        mutpb_opt = -1.0 if opts.mutation is None else opts.mutation
        workers, record, local = opts.workers, opts.record_history, opts.local_search
        chunks = opts.chunks or workers
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
            for ci, mp in enumerate(problem.configs):
                budget_s = (request.time_limit_s - clock.ms / 1e3) / (n_cfg - ci)
                rng = np.random.default_rng([request.seed, ci])
                ev = _Evaluator(mp, map_fn, chunks)
                genes, objs, hist, hit = self._run(mp, rng, ev, pop_n, gens, selection, cxpb, mutpb_opt, local,
                                                   budget_s, record, clock, progress, (ci, n_cfg))
                evals += ev.count
                stopped |= hit
                cands += [Candidate(ci, tuple(int(x) for x in row)) for row in genes]
                ok = (objs < PENALTY).all(axis=1)
                per_config.append({
                    "cpu_config": mp.config_dict(),
                    "front_size": int(len(genes)),
                    "schedulable": int(ok.sum()),
                    "best_first_objective": float(objs[ok, 0].min()) if ok.any() else None,
                    "evaluations": ev.count,
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
        status = "feasible" if best else "not_proven"
        if not best:
            notes.append("no schedulable mapping found (not a proof that none exists)")
        return ScheduleSolution(
            cands, status, objective=min(best) if best else None, wall_time_ms=clock.ms, evaluations=evals,
            notes=notes, details={"per_config": per_config, "selection": selection, "population": pop_n, "generations": gens},
            history=history if record else None,
        )

    def _run(self, mp, rng, evaluate, pop_n, gens, selection, cxpb, mutpb_opt, local, budget_s, record, clock, progress,
             where):
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

        pop_g = _initial(mp, pop_n, rng, genome)
        pop_o = evaluate(pop_g)
        keep = pareto_mask(pop_o)
        front_g, front_o = pop_g[keep], pop_o[keep]
        arch_g, arch_o = pop_g[:0], pop_o[:0]
        if selection == "nsga2":
            population = tools.selNSGA2(wrap(pop_g, pop_o), pop_n)
        history = []
        hit = False
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
            kids = _vary(parents, rng, cxpb, mutpb, genome)
            kid_o = evaluate(kids)
            if local > 0 and len(front_g):  # hill-climb a few front members with cut shifts and cluster moves
                best = int(np.argmin(front_o[:, 0]))
                picks = [best] + [int(i) for i in rng.integers(0, len(front_g), size=local - 1)]
                for k, i in enumerate(picks):
                    g, o = _climb(front_g[i], front_o[i], genome, evaluate, first_only=(k == 0))
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
            if record:
                history.append({"generation": gen, "elapsed_s": (clock.ms - t0) / 1e3, "evaluations": evaluate.count,
                                "front": front_o.copy()})
            if progress is not None:
                ci, n = where
                progress((ci + (gen + 1) / gens) / n, f"configuration {ci + 1}/{n}, generation {gen + 1}/{gens}")
            if (clock.ms - t0) / 1e3 > budget_s and gen < gens - 1:
                hit = True
                break
        fin = np.isfinite(front_o).all(axis=1)
        return front_g[fin], front_o[fin], history, hit


SOLVERS = [GaScheduler()]
