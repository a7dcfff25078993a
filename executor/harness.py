"""The one measurement harness: every path that times a configuration (layer profiling,
`--verify` candidates, the benches' plain-runtime references, the agent's first-deploy
verification) goes through `measure`.

Why a harness of its own: the same plain session, timed twice in one process, differed by
up to 2x on an idle 16-core host, and on the 2-core VM its first run after a 2-thread
session's pool had run was 2.8x slower and the whole next block 13% slower
(docs/measurement.md). What moved the figure was the *process's* state: other sessions and
their spinning pools alive, what ran just before, where the thread was pinned. So:

- each configuration (a `Job`) runs in a worker process of its own (`python -m
  executor.harness`), holding only that configuration's sessions, pinned to its devices'
  cores: before it builds them where a runtime's threads inherit the building thread's
  cores (OpenVINO), after it built them on every core where they do not (ONNX Runtime
  places its pool threads itself; `_builds_anywhere`), so that many workers' builds overlap;
- the worker warms up until two consecutive warm-up blocks agree (a steady state), not
  for a fixed count;
- the parent hands out blocks in rounds, the jobs in a new shuffled order each round and
  only one worker running at a time, so slow drift of the host falls on every job alike;
  back to back, a block is `settle` untimed runs then `block` timed ones (the round's
  figure is their median); at a rate, each timed run follows an idle gap of one period;
- with `aa`, one job is measured twice, by two independent workers in the same rounds,
  and the harness reports how far apart they came out (its own reproducibility, "A-A").

Workers die with the parent (PR_SET_PDEATHSIG) and every exchange has a deadline, so a
measurement is bounded before it starts and leaves no process behind.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from planner.core.schema import STEADY_BLOCK

if TYPE_CHECKING:
    from executor.runtime import RuntimeDevice
    from executor.slicing import LayeredModel

ROOT = Path(__file__).resolve().parents[1]
Slices = Sequence[tuple[int, int, str]]
Progress = Callable[[int, int, str], None]

# a warm-up ends when two consecutive warm-up blocks' medians agree within this (steady
# state) or after WARMUP_MAX_BLOCKS blocks / WARMUP_MAX_S seconds, whichever comes first
WARMUP_TOLERANCE = 0.03
WARMUP_MIN_BLOCKS = 2
WARMUP_MAX_BLOCKS = 12
WARMUP_MAX_S = 2.0
RATE_BLOCK = 2  # timed runs a turn at a rate, where each follows an idle period
GAP_S = 0.02  # quiet between two workers' blocks: an idle pool's spin-wait ends before the next worker starts
AA_SUFFIX = "~A2"
# Worker processes per configuration, taking its rounds in turn (round r: replica r mod n).
# Where a process's memory and code land moves a configuration's time from one process to
# the next (on the 2-core VM 1-4% CV for compute-bound models, 3-5% for the memory-bound
# wide_mlp, more for int8): no number of rounds in one process averages that out, and a
# plan's executor is one more such process. pyperf answers it the same way (many worker
# processes). In turn, not all every round: the same blocks, the same time, spread over
# processes. `PLANNER_HARNESS_REPLICAS` overrides the default (the test suite sets 1).
REPLICAS = 3
SPREAD_WARN_PCT = 10.0  # replicas further apart than this: the measurement says so
# Where a job's processes disagree, three do not pin its figure down: the median of n process
# medians moves by about 1.25 sd / sqrt(n). A job whose figure is less sure than ADAPT_SE_PCT
# gets as many fresh processes again, each taking as many rounds as the first ones did (all
# jobs take the extra rounds, so rounds stay paired), until it is sure enough or has
# MAX_REPLICAS; a job whose processes agree costs nothing more (pyperf's answer is 20
# processes for every benchmark; here only the unstable ones pay for them). Six, not more:
# on the VM twelve took the fidelity bench to 3x its time, and the case they were for
# (shufflenet, processes 12-29% apart) still missed by the host's drift between moments
ADAPT_SE_PCT = 1.0
MAX_REPLICAS = 6
# Back to back with the default block, a block holds at least this much timed work (pyperf's
# calibration of loops): 5 runs of a 0.22 ms model are 1.1 ms, whose median moved 10-13% from
# one round to the next on the VM (wide_mlp int8); a block of ~100 such runs is a figure
BLOCK_MIN_MS = 25.0


class HarnessError(RuntimeError):
    """A worker that could not build or run its configuration, or ran past its deadline;
    the message names the job."""


@dataclass(frozen=True)
class Item:
    """One thing a worker times. `slices`: a run of the model cut into consecutive slices,
    each (first layer, last layer, device id), run as the executor runs a plan
    (executor.sessions.SlicedModel) or, with `factory` ("path/to/file.py:Name"), by a
    runner that factory builds (a bench's plain-runtime reference: Name(lm, slices,
    devices, calibration, pool) returning a callable feed -> ms). `transfer_bytes`: a
    tensor of that size through a session on `device` (the profiler's transfer points)."""

    slices: tuple[tuple[int, int, str], ...] = ()
    factory: str | None = None
    transfer_bytes: int | None = None
    device: str | None = None

    def devices(self) -> list[str]:
        return [self.device] if self.device else list(dict.fromkeys(d for _, _, d in self.slices))


@dataclass(frozen=True)
class Job:
    """A configuration: the items one worker holds (their sessions alone in its process)
    and times one after the other in each of its blocks. `settle` / `block` override the
    measurement's for this job (the profiler's many two-slice switch runs take single
    turns after one settling run, as they did in one process)."""

    items: tuple[Item, ...]
    settle: int | None = None
    block: int | None = None
    warmup_max_s: float | None = None
    replicas: int | None = None  # None: the measurement's

    @classmethod
    def of(cls, slices: Slices, factory: str | None = None) -> "Job":
        return cls((Item(tuple((int(a), int(b), str(d)) for a, b, d in slices), factory),))

    def devices(self) -> list[str]:
        return list(dict.fromkeys(d for it in self.items for d in it.devices()))


@dataclass
class ItemTiming:
    rounds_ms: list[float]  # per round, the median of the block's timed runs (paired across jobs)
    runs_ms: list[float]  # every timed run
    slices_ms: list[list[float]]  # per slice, every timed run
    slice_rounds_ms: list[list[float]] = field(default_factory=list)  # per slice, per round the block's median

    def summary(self) -> dict:
        from executor.sessions import summarise_ms

        return {**summarise_ms(self.rounds_ms), "samples_ms": list(self.rounds_ms)}


@dataclass
class JobTiming:
    items: list[ItemTiming]
    cores: list[int]
    pid: int
    warmup_runs: int
    warmup_steady: bool  # False: the warm-up hit its bound before two blocks agreed
    busy_s: float = 0.0  # the workers' time in their blocks
    replicas: int = 1  # worker processes that took the rounds in turn
    replica_ms: list[float] = field(default_factory=list)  # each replica's median (its items' sum)
    block: int = 0  # timed runs a block (back to back with the default block: calibrated to BLOCK_MIN_MS)

    @property
    def spread_pct(self) -> float:
        """How far apart the replicas came out: (slowest - fastest) / fastest of their medians."""
        r = [x for x in self.replica_ms if x > 0]
        return (max(r) / min(r) - 1) * 100 if len(r) > 1 else 0.0

    @property
    def se_pct(self) -> float:
        """How sure the figure is, from its processes: the standard error of the median of
        the replicas' medians, in % of it (0 with one process)."""
        return figure_se_pct(self.replica_ms)


def figure_se_pct(replica_ms: Sequence[float]) -> float:
    """1.2533 sd / sqrt(n) of the processes' medians, in % of their median: the median's
    standard error, what one more set of processes would move the figure by (one sd)."""
    r = np.asarray([x for x in replica_ms if x > 0], dtype=float)
    if len(r) < 2:
        return 0.0
    return float(1.2533 * r.std(ddof=1) / np.sqrt(len(r)) / np.median(r) * 100)


@dataclass
class Measured:
    jobs: dict[str, JobTiming]
    rounds: int
    block: int
    settle: int
    rate_hz: float | None
    aa: dict | None = None  # the replicated job's reproducibility (see `aa_figures`)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def aa_figures(a: Sequence[float], b: Sequence[float]) -> dict:
    """How far apart two workers timing the same configuration came out: the difference
    of their medians (the figure a measurement reports) and, round by round, of their
    paired figures; in % of the first's median."""
    ma, mb = float(np.median(a)), float(np.median(b))
    per_round = [abs(x - y) / ((x + y) / 2) * 100 for x, y in zip(a, b)]
    return {"a_ms": ma, "b_ms": mb, "aa_pct": abs(ma - mb) / ma * 100 if ma > 0 else 0.0,
            "per_round_median_pct": float(np.median(per_round)) if per_round else 0.0,
            "per_round_worst_pct": float(np.max(per_round)) if per_round else 0.0}


# ----------------------------------------------------------------------------- framing
def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _recv(fd: int, deadline: float | None = None):
    (n,) = struct.unpack("<Q", _read_exact(fd, 8, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))


# ----------------------------------------------------------------------------- the parent
class _Worker:
    def __init__(self, name: str, job: Job, setup: dict, cores: list[int], build_cores: list[int] | None = None):
        """A worker for `job`, started and built on `build_cores` (default: `cores`) and
        pinned to `cores` before its warm-up."""
        self.name, self.job, self.cores = name, job, cores
        start_on = cores if build_cores is None else build_cores
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        parent = os.getpid()
        # stderr to a file, not a pipe: a pipe nobody reads during the run fills at 64 KiB of
        # runtime warnings and would block the worker; the file's end names why it died
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "executor.harness", str(parent)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.err, env=env, cwd=str(ROOT), close_fds=True,
            preexec_fn=lambda: os.sched_setaffinity(0, start_on) if hasattr(os, "sched_setaffinity") else None)
        self.out = self.proc.stdout.fileno()
        _send(self.proc.stdin.fileno(), {"setup": setup, "job": job, "cores": cores,
                                         "pin_before_build": build_cores is None or list(build_cores) == list(cores)})

    def ask(self, msg, deadline: float):
        try:
            _send(self.proc.stdin.fileno(), msg)
            reply = _recv(self.out, deadline)
        except TimeoutError:
            raise HarnessError(f"job '{self.name}': no answer within its deadline") from None
        except (EOFError, BrokenPipeError, OSError):
            raise HarnessError(f"job '{self.name}': the worker died ({self._stderr()})") from None
        if isinstance(reply, dict) and "error" in reply:
            raise HarnessError(f"job '{self.name}': {reply['error']}")
        return reply

    def wait_ready(self, deadline: float):
        try:
            reply = _recv(self.out, deadline)
        except TimeoutError:
            raise HarnessError(f"job '{self.name}': not built within its deadline") from None
        except (EOFError, OSError):
            raise HarnessError(f"job '{self.name}': the worker died while building ({self._stderr()})") from None
        if "error" in reply:
            raise HarnessError(f"job '{self.name}': {reply['error']}")
        return reply

    def _stderr(self) -> str:
        try:
            self.proc.kill()
            self.proc.wait(5)
            self.err.seek(max(0, self.err.seek(0, os.SEEK_END) - 4096))
            err = self.err.read().decode(errors="replace").strip().splitlines()
        except Exception:  # noqa: BLE001 - best effort: the reason, if the worker left one
            err = []
        return err[-1][:300] if err else f"exit code {self.proc.poll()}"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                _send(self.proc.stdin.fileno(), {"cmd": "exit"})
                self.proc.wait(2)
            except Exception:  # noqa: BLE001 - then it is killed
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.err):
            try:
                f.close()
            except OSError:
                pass


def _builds_anywhere(job: Job, by_id: Mapping) -> bool:
    """Whether a job's worker may build on every core and be pinned after: every device's
    runtime places its pool threads itself (ONNX Runtime: explicit per-thread affinities,
    and executor.runtime.build_session pins the creating thread), so nothing it builds
    keeps the cores it was built on. Pinned first, the workers of one device queue on its
    core: on the 16-vCPU host three int8 workers built for 50 s on one core while 14 idled.
    A runtime whose threads inherit the building thread's cores (OpenVINO) is built pinned."""
    from executor import runtimes

    return all(getattr(runtimes.get(by_id[d].runtime), "places_pool_threads", False) for d in job.devices())


def _cores_of(job: Job, by_id: Mapping, all_cores: Sequence[int]) -> list[int]:
    """The cores a job's worker is pinned to: its devices' affinities (all the process's
    cores for a device without one)."""
    cores: set[int] = set()
    for dev in job.devices():
        aff = by_id[dev].affinity
        cores.update(aff if aff is not None else all_cores)
    return sorted(cores or all_cores)


def memory_need(lm, jobs: Mapping[str, Job], replicas: int = 1) -> int:
    """Bytes the workers of `jobs` need, from the model's shapes alone: each worker holds
    the model's tensors once (slicing.memory_estimate) and, per distinct slice it builds
    (first, last, device), that slice's weights twice (the sub-model and its session)."""
    from executor.slicing import memory_estimate

    base = memory_estimate(lm)[0]
    weights = [int(layer.weight_bytes or 0) for layer in lm.layers]
    total = 0
    for j in jobs.values():
        spans = {(a, b, d) for it in j.items for a, b, d in it.slices}
        total += base + sum(2 * sum(weights[a:b + 1]) for a, b, _ in spans)
    return total * replicas


def check_memory(lm, jobs: Mapping[str, Job], replicas: int = 1, available: int | None = None) -> None:
    """HarnessError with the figures when the workers would need more than MEMORY_SHARE of
    the memory there is: refused before a worker starts, not a MemoryError halfway."""
    from executor.slicing import MEMORY_SHARE, available_memory_bytes

    need = memory_need(lm, jobs, replicas)
    available = available_memory_bytes() if available is None else available
    if available is not None and need > MEMORY_SHARE * available:
        raise HarnessError(f"measuring {len(jobs)} configuration(s) x {replicas} worker(s) needs about "
                           f"{need / 2**30:.2f} GiB (each worker holds its own sessions); at most {MEMORY_SHARE:.0%} of the "
                           f"{available / 2**30:.2f} GiB available may go to it: measure fewer candidates or devices at once")


def default_replicas() -> int:
    """REPLICAS, or `PLANNER_HARNESS_REPLICAS` where set."""
    env = os.environ.get("PLANNER_HARNESS_REPLICAS")
    return max(1, int(env)) if env else REPLICAS


def _fit_replicas(lm, jobs: Mapping[str, Job], want: Mapping[str, int], notes: list[str]) -> dict[str, int]:
    """Replicas per job, fewer where the memory there is cannot hold them all (each worker
    holds its own sessions): a measurement with fewer processes, said in a note, rather
    than a refusal; one worker per job that does not fit is refused (check_memory)."""
    from executor.slicing import MEMORY_SHARE, available_memory_bytes

    n = dict(want)
    available = available_memory_bytes()
    if available is not None:
        per_job = {name: memory_need(lm, {name: j}) for name, j in jobs.items()}
        while sum(per_job[k] * n[k] for k in n) > MEMORY_SHARE * available and max(n.values()) > 1:
            top = max(n.values())
            n = {k: v - 1 if v == top else v for k, v in n.items()}
        if n != dict(want):
            notes.append(f"memory: {max(n.values())} worker(s) per configuration instead of {max(want.values())}")
    check_memory(lm, {f"{k}#{i}": jobs[k] for k, v in n.items() for i in range(v)})
    return n


def measure(lm, devices: Sequence, feed: Mapping[str, np.ndarray], jobs: Mapping[str, Job | Slices], *, rounds: int,
            block: int | None = None, settle: int | None = None, rate_hz: float | None = None, pool: str = "auto",
            clock: str = "wall", seed: int = 0, aa: str | None = None, replicas: int | None = None,
            calibration_count: int = 8, calibration_seed: int | None = None, progress: Progress | None = None,
            timeout_s: float = 900.0, warmup_max_s: float | None = None,
            adapt: bool | None = None) -> Measured:
    """Time `jobs` (name -> Job, or the slices of one sliced run) of model `lm` on runtime
    `devices` (executor.runtime.RuntimeDevice, sent to the workers as they are), each
    in its own pinned worker processes, `rounds` interleaved rounds. `replicas`: worker
    processes per job (default REPLICAS; a Job's own `replicas` wins), round r's block taken
    by replica r mod n, so a job's figure spans processes (`JobTiming.spread_pct` says how
    far apart they came out); `adapt` (default: with more than one replica) gives a job
    whose processes leave its figure less sure than ADAPT_SE_PCT more of them. `aa`: a job
    name measured a second time by independent workers (reported in `Measured.aa`).
    `timeout_s` bounds the whole measurement; a worker that fails names its job
    (HarnessError)."""
    from executor.runtime import PROCESS_CORES
    from planner.core.schema import STEADY_SETTLE

    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    replicas = default_replicas() if replicas is None else replicas
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    # at a rate each timed run costs a period of idle: two a turn (the old single turn, and a pair to take the median of)
    block_given = block
    block = (STEADY_BLOCK if rate_hz is None else RATE_BLOCK) if block is None else max(1, int(block))
    settle = (STEADY_SETTLE if settle is None else max(0, int(settle))) if rate_hz is None else 0
    jobs = _checked_jobs(jobs, devices, aa)
    if warmup_max_s is None:  # a test suite may shorten warm-ups for the whole run (not their rule)
        warmup_max_s = float(os.environ.get("PLANNER_HARNESS_WARMUP_MAX_S") or WARMUP_MAX_S)
    notes: list[str] = []
    # never more processes than rounds: a replica that takes no round measured nothing
    n_rep = _fit_replicas(lm, jobs, {name: max(1, min(rounds, j.replicas or replicas)) for name, j in jobs.items()},
                          notes)
    run = _Run(lm, jobs, {d.id: d for d in devices}, sorted(PROCESS_CORES), time.monotonic() + timeout_s,
               np.random.default_rng(seed), rate_hz, progress, notes)
    with tempfile.TemporaryDirectory(prefix="harness-") as tmp:
        model_path = Path(tmp) / "model.onnx"
        model_path.write_bytes(lm.model.SerializeToString())
        feed_path = Path(tmp) / "feed.npz"
        np.savez(feed_path, **{k: np.asarray(v) for k, v in feed.items()})
        run.setup = {"model": str(model_path), "feed": str(feed_path), "devices": list(devices),
                     "rate_hz": rate_hz, "settle": settle, "block": block, "pool": pool, "clock": clock,
                     "calibration_count": calibration_count,
                     "calibration_seed": seed if calibration_seed is None else calibration_seed,
                     "block_min_ms": BLOCK_MIN_MS if block_given is None and rate_hz is None else 0.0,
                     "warmup_max_s": warmup_max_s, "sys_path": [p for p in sys.path if p]}
        try:
            run.start({name: range(n) for name, n in n_rep.items()})
            t_first = time.monotonic()
            run.take(rounds, lambda name, r: r % n_rep[name])
            if replicas > 1 if adapt is None else adapt:
                run.more_where_unsure(n_rep, rounds, t_first - run.t_start, time.monotonic() - t_first, timeout_s)
        finally:
            run.close()
    out = {name: run.timing(name, n_rep[name], block) for name in jobs}
    res = Measured(out, rounds, block, settle, rate_hz, wall_s=time.monotonic() - run.t_start, notes=notes)
    if aa is not None:
        twin = out.pop(aa + AA_SUFFIX)
        res.aa = {"job": aa, **aa_figures(out[aa].items[0].rounds_ms, twin.items[0].rounds_ms)}
    unsteady = [n for n, j in out.items() if not j.warmup_steady]
    if unsteady:
        res.notes.append(f"warm-up reached no steady state within its bound: {', '.join(unsteady)}")
    spread = [f"{n} {j.spread_pct:.0f}%" for n, j in out.items() if j.spread_pct > SPREAD_WARN_PCT]
    if spread:
        res.notes.append(f"unstable: worker processes of the same configuration more than {SPREAD_WARN_PCT:.0f}% "
                         f"apart: {', '.join(spread)} (more rounds, or a quieter host)")
    return res


def _checked_jobs(jobs: Mapping[str, Job | Slices], devices: Sequence, aa: str | None) -> dict[str, Job]:
    """Jobs as Jobs, each refused with its name where it uses an undeclared device; with
    `aa`, that job's twin added (AA_SUFFIX)."""
    by_id = list(dict.fromkeys(d.id for d in devices))
    jobs = {name: j if isinstance(j, Job) else Job.of(j) for name, j in jobs.items()}
    for name, j in jobs.items():
        unknown = [d for d in j.devices() if d not in by_id]
        if unknown:
            raise HarnessError(f"job '{name}' uses device(s) {', '.join(unknown)}; declared: {', '.join(by_id)}")
    if aa is not None:
        if aa not in jobs:
            raise ValueError(f"aa: no job named '{aa}'")
        jobs = {**jobs, aa + AA_SUFFIX: jobs[aa]}
    return jobs


class _Run:
    """One measurement under way: its workers (job#replica), what each answered when built
    and warmed, and every block each job's workers timed, in round order."""

    def __init__(self, lm, jobs: dict[str, Job], by_id: Mapping, all_cores: list[int], deadline: float,
                 rng: np.random.Generator, rate_hz: float | None, progress: Progress | None, notes: list[str]):
        self.lm, self.jobs, self.by_id, self.all_cores, self.deadline = lm, jobs, by_id, all_cores, deadline
        self.rng, self.rate_hz, self.progress, self.notes = rng, rate_hz, progress, notes
        self.t_start = time.monotonic()
        self.setup: dict = {}
        self.workers: dict[str, _Worker] = {}
        self.ready: dict[str, dict] = {}
        self.warm: dict[str, dict] = {}
        self.got: dict[str, list[dict]] = {name: [] for name in jobs}  # job -> round -> block
        self.total = 0

    def start(self, which: Mapping[str, range]) -> None:
        """Start, build and warm the workers `which` (job -> replica numbers)."""
        new = [f"{name}#{k}" for name, ks in which.items() for k in ks]
        for name, ks in which.items():
            job = self.jobs[name]
            anywhere = list(self.all_cores) if _builds_anywhere(job, self.by_id) else None
            for k in ks:
                self.workers[f"{name}#{k}"] = _Worker(name, job, self.setup, _cores_of(job, self.by_id, self.all_cores),
                                                     build_cores=anywhere)
        self.ready.update({w: self.workers[w].wait_ready(self.deadline) for w in new})
        # warm-ups one worker at a time: a worker warming up is measured alone too
        self.warm.update({w: self.workers[w].ask({"cmd": "warm"}, self.deadline) for w in new})

    def take(self, rounds: int, replica_of: Callable[[str, int], int]) -> None:
        """`rounds` more rounds, the jobs in a new shuffled order each; a job's block taken by
        its replica replica_of(job, round)."""
        names = list(self.jobs)
        self.total += rounds
        for r in range(rounds):
            for i in self.rng.permutation(len(names)):
                name = names[i]
                k = replica_of(name, r)
                reply = self.workers[f"{name}#{k}"].ask({"cmd": "block"}, self.deadline)
                self.got[name].append({**reply, "_replica": k})
                if self.rate_hz is None:
                    time.sleep(GAP_S)
            if self.progress:
                done = len(self.got[names[0]])
                self.progress(done, self.total, f"round {done}/{self.total}")

    def more_where_unsure(self, n_rep: dict[str, int], rounds: int, start_s: float, phase_s: float,
                          timeout_s: float) -> None:
        """Jobs whose processes leave their figure unsure (ADAPT_SE_PCT) get as many fresh
        processes again, each taking as many rounds as a first one did (every job takes the
        extra rounds: they stay paired), until sure or MAX_REPLICAS, memory and time allowing.
        Updates n_rep."""
        n0 = dict(n_rep)
        while True:
            unsure = {name: n for name, n in n_rep.items() if 1 < n < MAX_REPLICAS
                      and figure_se_pct(_replica_medians(self.got[name], n)) > ADAPT_SE_PCT}
            if not unsure:
                return
            add = {name: min(n, MAX_REPLICAS - n) for name, n in unsure.items()}
            try:
                check_memory(self.lm, {f"{k}#{i}": self.jobs[k] for k, v in n_rep.items()
                                       for i in range(v + add.get(k, 0))})
            except HarnessError:
                self.notes.append(f"memory: no more worker processes for {', '.join(unsure)}, whose processes disagree")
                return
            extra = max(1, rounds // max(n0[name] for name in add)) * max(add.values())
            cost_s = phase_s * extra / rounds + start_s * sum(add.values()) / sum(n0.values())
            if time.monotonic() + cost_s > self.deadline - 0.1 * timeout_s:
                self.notes.append(f"time: no more worker processes for {', '.join(unsure)}, whose processes disagree")
                return
            old = dict(n_rep)
            self.start({name: range(old[name], old[name] + a) for name, a in add.items()})
            self.take(extra, lambda name, r: old[name] + r % add[name] if name in add else r % old[name])
            n_rep.update({name: old[name] + a for name, a in add.items()})
            self.notes.append("re-measured with more worker processes, theirs disagreeing: "
                              + ", ".join(f"{name} {n_rep[name]}" for name in add))

    def timing(self, name: str, replicas: int, block: int) -> JobTiming:
        """A job's figures from its blocks: per item, per round and per run; its processes'."""
        blocks = self.got[name]
        reps = [f"{name}#{k}" for k in range(replicas)]
        items = []
        for k in range(len(self.jobs[name].items)):
            per_round = [b["items"][k] for b in blocks]
            n_slices = len(per_round[0]["slices_ms"])
            items.append(ItemTiming(
                rounds_ms=[float(np.median(b["runs_ms"])) for b in per_round],
                runs_ms=[x for b in per_round for x in b["runs_ms"]],
                slices_ms=[[x for b in per_round for x in b["slices_ms"][s]] for s in range(n_slices)],
                slice_rounds_ms=[[float(np.median(b["slices_ms"][s])) for b in per_round] for s in range(n_slices)]))
        return JobTiming(items, self.ready[reps[0]]["cores"], self.ready[reps[0]]["pid"],
                         sum(self.warm[w]["runs"] for w in reps), all(self.warm[w]["steady"] for w in reps),
                         busy_s=sum(b["_s"] for b in blocks), replicas=replicas,
                         replica_ms=_replica_medians(blocks, replicas),
                         block=max(self.warm[w].get("block", block) for w in reps))

    def close(self) -> None:
        for w in self.workers.values():
            w.close()


def _replica_medians(blocks: Sequence[dict], n: int) -> list[float]:
    """Each worker process's median of its rounds, a round's figure the sum of its items'
    medians (a profile's layer job: all its layers), in replica order."""
    out = []
    for k in range(n):
        mine = [sum(float(np.median(it["runs_ms"])) for it in b["items"]) for b in blocks if b["_replica"] == k]
        out.append(float(np.median(mine)) if mine else 0.0)
    return out


def measure_candidates(
    lm: LayeredModel, devices: Sequence[RuntimeDevice], inputs: Mapping[str, np.ndarray],
    slices_by_name: Mapping[str, Sequence[tuple[int, int, str]]], *, runs: int, settle: int,
    rate_hz: float | None = None, pool: str = "auto", clock: str = "wall", seed: int = 0,
    aa: str | None = "plan", replicas: int | None = None, timeout_s: float = 900.0,
) -> dict[str, dict]:
    """Candidate slicings of one model timed end to end as planner execute and the agent
    run them (SlicedModel, its pool policy), each in its own pinned worker process of the
    measurement harness (executor.harness), in `runs` shuffled rounds: back to back after
    `settle` untimed runs of each, or at `rate_hz`. name -> the total's summary plus
    `samples_ms` in round order (paired across candidates) and `harness` (the worker's
    cores and warm-up); the `aa` candidate (default the plan, when there is one) also
    carries `aa` (the harness's reproducibility: that candidate timed by a second worker).
    What a verified plan (planner solve --verify, the agent on a first deploy) is chosen from."""
    m = measure(lm, list(devices), inputs, {name: list(sl) for name, sl in slices_by_name.items()},
                        rounds=runs, settle=settle, rate_hz=rate_hz, pool=pool, clock=clock,
                        seed=seed, aa=aa if aa in slices_by_name else None, replicas=replicas, timeout_s=timeout_s)
    out = {}
    for name, job in m.jobs.items():
        out[name] = {**job.items[0].summary(),
                     "harness": {"cores": job.cores, "warmup_runs": job.warmup_runs, "steady": job.warmup_steady}}
    if m.aa is not None:
        out[m.aa["job"]]["aa"] = m.aa
    return out


def transfer_model(size_bytes: int, int8: bool) -> onnx.ModelProto:
    """A tensor of `size_bytes` through a session: Identity (fp32), or quantised and
    dequantised (int8)."""
    n = max(1, size_bytes // 4)
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, n])
    if int8:
        inits = [
            helper.make_tensor("s", onnx.TensorProto.FLOAT, [], [0.05]),
            helper.make_tensor("z", onnx.TensorProto.UINT8, [], [128]),
        ]
        nodes = [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
        ]
    else:
        inits, nodes = [], [helper.make_node("Identity", ["x"], ["y"])]
    g = helper.make_graph(nodes, "transfer", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


# ----------------------------------------------------------------------------- the worker
def _load_factory(spec: str):
    import importlib.util

    path, _, name = spec.rpartition(":")
    mod_name = "_harness_factory_" + Path(path).stem
    if mod_name not in sys.modules:
        s = importlib.util.spec_from_file_location(mod_name, path)
        mod = importlib.util.module_from_spec(s)
        sys.modules[mod_name] = mod
        s.loader.exec_module(mod)
    return getattr(sys.modules[mod_name], name)


def _build_runner(item: Item, lm, devices, setup: dict, feed: dict, calib_cache: dict):
    """A callable () -> (total ms, [ms per slice]) for one item."""
    from executor.runtime import build_session, clock_ns, pinned
    from executor.sessions import SlicedModel, slice_policy
    from executor.slicing import random_inputs

    by_id = {d.id: d for d in devices}
    if item.transfer_bytes is not None:
        d = by_id[item.device]
        sess = build_session(transfer_model(item.transfer_bytes, d.precision == "int8"), d,
                             slice_policy(setup["pool"], 2))
        x = {"x": np.random.default_rng(0).standard_normal((1, max(1, item.transfer_bytes // 4))).astype(np.float32)}
        pin, now = pinned(d), clock_ns(setup["clock"], [d])

        def run_transfer():
            t0 = now()
            with pin:
                sess.run(["y"], x)
            ms = (now() - t0) / 1e6
            return ms, [ms]
        return run_transfer
    calibration = None
    if any(by_id[d].precision == "int8" for d in item.devices()):
        if "feeds" not in calib_cache:
            s0 = setup["calibration_seed"]
            calib_cache["feeds"] = [random_inputs(lm, s0 + i) for i in range(setup["calibration_count"])]
        calibration = calib_cache["feeds"]
    if item.factory:
        from executor.sessions import capture

        need = list(dict.fromkeys([x for layer in lm.layers for x in layer.inputs] + list(lm.graph_inputs)))
        values = capture(lm, need, calibration) if calibration else []
        chain = _load_factory(item.factory)(lm, list(item.slices), devices, values, setup["pool"])

        def run_chain():
            return chain(feed), []
        return run_chain
    sm = SlicedModel(lm, list(item.slices), devices, calibration=calibration, clock=setup["clock"], pool=setup["pool"],
                     shared=calib_cache.setdefault("sessions", {}))

    def run_sliced():
        t0 = sm.clock()
        _, ts = sm.run_timed(feed)
        return (sm.clock() - t0) / 1e6, ts
    return run_sliced


def _worker_main() -> None:
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
    from planner.core.procs import die_with_parent

    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the parent, which closes its workers
    fd_in, fd_out = sys.stdin.fileno(), os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr, never into the protocol
    first = _recv(fd_in)
    setup, job, cores = first["setup"], first["job"], first["cores"]
    try:
        for p in setup["sys_path"]:
            if p not in sys.path:
                sys.path.append(p)
        if hasattr(os, "sched_setaffinity") and first.get("pin_before_build", True):
            os.sched_setaffinity(0, cores)
        import onnx

        from executor.slicing import layers

        lm = layers(onnx.load(setup["model"]), materialised=True)
        with np.load(setup["feed"]) as z:
            feed = {k: z[k] for k in z.files}
        used = set(job.devices())  # the RuntimeDevices themselves (a PE profile makes some that no spec names)
        devices = [d for d in setup["devices"] if d.id in used]
        calib: dict = {}
        runners = [_build_runner(it, lm, devices, setup, feed, calib) for it in job.items]
        if hasattr(os, "sched_setaffinity"):  # built anywhere (_builds_anywhere): measured on its cores
            from executor.runtime import pin_thread

            pin_thread(cores)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which names the job
        _send(fd_out, {"error": f"{type(exc).__name__}: {str(exc)[:500]}"})
        return
    _send(fd_out, {"pid": os.getpid(), "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []})
    rate_hz = setup["rate_hz"]
    settle = setup["settle"] if job.settle is None or rate_hz is not None else job.settle
    block = setup["block"] if job.block is None else job.block
    block_min_ms = setup.get("block_min_ms", 0.0) if job.block is None else 0.0
    period = None if rate_hz is None else 1.0 / rate_hz
    while True:
        try:
            msg = _recv(fd_in)
        except EOFError:
            return
        cmd = msg.get("cmd")
        try:
            if cmd == "exit":
                return
            if cmd == "warm":
                warm = _warm(runners, settle, block, setup["warmup_max_s"] if job.warmup_max_s is None else job.warmup_max_s)
                per_block_ms = sum(warm.pop("run_ms"))
                if block_min_ms > 0 and per_block_ms > 0:  # calibrated: a block holds at least block_min_ms of work
                    block = max(block, min(1000, int(np.ceil(block_min_ms / per_block_ms))))
                _send(fd_out, {**warm, "block": block})
            elif cmd == "block":
                t_block = time.monotonic()
                out = []
                for run in runners:
                    for _ in range(settle):
                        run()
                    runs_ms, slices_ms = [], None
                    for _ in range(block):
                        if period is not None:
                            time.sleep(period)
                        total, ts = run()
                        runs_ms.append(total)
                        slices_ms = [[] for _ in ts] if slices_ms is None else slices_ms
                        for s, t in enumerate(ts):
                            slices_ms[s].append(t)
                    out.append({"runs_ms": runs_ms, "slices_ms": slices_ms or []})
                _send(fd_out, {"items": out, "_s": time.monotonic() - t_block})
            else:
                _send(fd_out, {"error": f"unknown command {cmd!r}"})
        except Exception as exc:  # noqa: BLE001 - reported, the parent names the job
            _send(fd_out, {"error": f"{type(exc).__name__}: {str(exc)[:500]}"})


def _warm(runners, settle: int, block: int, max_s: float) -> dict:
    """Warm-up blocks (back to back, every item) until two consecutive blocks' medians
    agree within WARMUP_TOLERANCE (the median over the items of their change), at least WARMUP_MIN_BLOCKS blocks, at most
    WARMUP_MAX_BLOCKS or `max_s` seconds."""
    n = max(settle + block, 5)
    t0 = time.monotonic()
    prev, runs, steady, meds = None, 0, False, []
    for k in range(WARMUP_MAX_BLOCKS):
        meds = []
        for run in runners:
            meds.append(float(np.median([run()[0] for _ in range(n)])))
            runs += n
        if prev is not None and k + 1 >= WARMUP_MIN_BLOCKS and float(np.median(
                [abs(a - b) / max(b, 1e-9) for a, b in zip(meds, prev)])) <= WARMUP_TOLERANCE:
            steady = True
            break
        prev = meds
        if time.monotonic() - t0 > max_s:
            break
    return {"runs": runs, "steady": steady, "run_ms": meds}


if __name__ == "__main__":
    _worker_main()
