"""A real-time schedule beside another Python thread of its process: the interpreter lock.

The schedule executor's release thread and PE workers run at SCHED_FIFO, but each needs
Python's interpreter lock to release a frame and to start a segment. The lock has no
priority inheritance: a thread at normal priority that holds it (parsing, serialising, a
C call that keeps it) makes them wait, and when the schedule's own pool threads preempt
that holder the wait lasts until a core frees. The stall probe, a process of its own,
sees none of it.

This bench runs one executor per case (the regime's 2-core case: two copies of a model
taking turns on one 2-thread PE; the 1+1 case: two copies each split over two 1-core PEs),
at half load, real-time where allowed, and alternates run by run (order reversed every
other repeat):

- `alone`:   no other Python thread;
- `sampler`: HostSampler's thread beside it (a /proc read every 0.5 s), as the profile's
             regime cases ran until they parked it (HostSampler.paused);
- `parked`:  the same sampler, parked for the run;
- `json`:    a thread that every 50 ms serialises and parses a ~300 KB document (an
             agent's plan fetch or telemetry).

Per run: the latest release (ms after its due time), the longest wait of a ready segment
(queueing included), the worst response over its network's median, the CPU ms other
Python threads took (PipelineResult.foreign_cpu_ms: what a run names), and the longest
host stall the probe measured in it, so that a host stall is not read as the lock.
Prints medians and maxima per case and condition; writes JSON.

    python bench/gil_inversion.py [--model shufflenet] [--reps 6] [--frames 300]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from schedule_fidelity import load  # noqa: E402
from executor import realtime, runtime  # noqa: E402
from executor.pe_profile import _half_load  # noqa: E402
from executor.slicing import random_inputs  # noqa: E402
from executor.pipeline import FOREIGN_CPU_MS, FrameRun, HostSampler, Network, PipelineExecutor, SegmentRun  # noqa: E402
from executor.stall_probe import StallProbe  # noqa: E402
from planner.progress import Bar  # noqa: E402
from results_io import write_json  # noqa: E402

DOC = {"entries": [{"layer": i, "pe": "cpu0", "time_ms": i * 0.1, "name": f"layer_{i}"} for i in range(4000)]}


@contextlib.contextmanager
def json_thread(every_s: float = 0.05):
    """A thread that serialises and parses DOC every `every_s` (~6 ms each on the VM)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            json.loads(json.dumps(DOC))

    th = threading.Thread(target=loop, name="json-worker", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()


@contextlib.contextmanager
def sampler_parked(cores):  # noqa: ANN001
    with HostSampler(cores) as s, s.paused():
        yield


def executors(lm, cores: list[int], model_ms: float) -> dict[str, PipelineExecutor]:  # noqa: ANN001
    cluster = runtime.parse_device("cpu=CPUExecutionProvider")
    L = len(lm.layers)
    one = replace(cluster, id="pe", threads=1)
    out = {}
    nets = [Network(f"copy{j}", lm, [0] * L, 0.0, j) for j in range(2)]
    _half_load(nets, 1, model_ms, 0.1)
    out["2-core"] = PipelineExecutor(nets, [replace(cluster, id="pe2", threads=2, affinity=tuple(cores[:2]))],
                                     "response_time")
    nets = [Network(f"copy{j}", lm, [j] * (L // 2) + [(j + 1) % 2] * (L - L // 2), 0.0, j) for j in range(2)]
    _half_load(nets, 2, model_ms * 2, 0.1)
    out["1+1"] = PipelineExecutor(nets, [replace(one, id="r0", affinity=(cores[0],)),
                                         replace(one, id="r1", affinity=(cores[1],))], "response_time")
    return out


def one_run(ex: PipelineExecutor, frames: int, probe: StallProbe) -> dict:
    realtime.settle()
    ex.run(10, timeout_s=60)
    trace: list = []
    res = ex.run(frames, timeout_s=120, trace=trace)
    late = [f.released_ms - f.due_ms for f in trace if isinstance(f, FrameRun)]
    waits = [s.start_ms - s.ready_ms for s in trace if isinstance(s, SegmentRun)]
    t0, t1 = res.t0_s * 1e3, res.t0_s * 1e3 + res.wall_s * 1e3
    return {"policy": res.scheduling, "release_late_max_ms": round(max(late), 3),
            "ready_wait_max_ms": round(max(waits), 3),
            "response_max_over_median": round(max(max(n.response_ms) / float(np.median(n.response_ms))
                                                  for n in res.networks), 3),
            "foreign_cpu_ms": round(sum(res.foreign_cpu_ms.values()), 3),
            "named": sum(res.foreign_cpu_ms.values()) > FOREIGN_CPU_MS,
            "host_stall_ms": round(max([d for t, d in probe.stalls() if t0 <= t <= t1], default=0.0), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="shufflenet", help="onnx light model (default: shufflenet)")
    ap.add_argument("--reps", type=int, default=6, help="repeats of every case and condition (default: 6)")
    ap.add_argument("--frames", type=int, default=300, help="frames per network per run (default: 300)")
    ap.add_argument("--out", default="bench/results/gil_inversion.json", help="JSON output (default: %(default)s)")
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        print("needs two cores")
        return 1
    lm = load(args.model)
    sess = runtime.build_session(lm.model, runtime.parse_device(f"c=CPUExecutionProvider:threads=1,affinity={cores[0]}"))
    feed = random_inputs(lm, 0)
    outs = [o.name for o in sess.get_outputs()]
    for _ in range(10):
        sess.run(outs, feed)
    t = time.perf_counter()
    for _ in range(20):
        sess.run(outs, feed)
    model_ms = (time.perf_counter() - t) / 20 * 1e3
    t = time.perf_counter()
    json.loads(json.dumps(DOC))
    json_ms = (time.perf_counter() - t) * 1e3
    print(f"host: {os.cpu_count()} CPUs, cores {cores}, load average {os.getloadavg()[0]:.2f}; {args.model} "
          f"{model_ms:.2f} ms on one core; the json thread's work {json_ms:.1f} ms every 50 ms")
    conds = {"alone": contextlib.nullcontext, "sampler": lambda: HostSampler(cores[:2]),
             "parked": lambda: sampler_parked(cores[:2]), "json": json_thread}
    exs = executors(lm, cores, model_ms)
    rows: list[dict] = []
    bar = Bar("runs", total=args.reps * len(exs) * len(conds), unit="run")
    with StallProbe(cores[:2]) as probe:
        for r in range(args.reps):
            for case, ex in exs.items():
                for c in (list(conds) if r % 2 == 0 else list(conds)[::-1]):
                    with conds[c]():
                        row = one_run(ex, args.frames, probe)
                    rows.append({"rep": r, "case": case, "condition": c, **row})
                    bar.advance(message=f"{case} {c}")
    bar.close()
    print("\nper run: release late = the latest release after its due time; ready wait = the longest a ready "
          "segment waited (queueing included); worst/median = the worst response over its network's median; "
          f"foreign = the CPU ms other Python threads took (a run names over {FOREIGN_CPU_MS:g} ms); host stall = "
          "the probe's longest in the run. Medians over the runs [max].")
    summary = {}
    for case in exs:
        for c in conds:
            a = [x for x in rows if x["case"] == case and x["condition"] == c]

            def med_max(key: str) -> tuple[float, float]:
                v = [x[key] for x in a]
                return round(float(np.median(v)), 3), round(max(v), 3)
            s = {k: med_max(k) for k in ("release_late_max_ms", "ready_wait_max_ms", "response_max_over_median",
                                        "foreign_cpu_ms", "host_stall_ms")}
            s["runs_named"] = sum(x["named"] for x in a)
            s["runs"] = len(a)
            summary[f"{case} {c}"] = s
            print(f"{case:7s} {c:8s} release late {s['release_late_max_ms'][0]:6.2f} [{s['release_late_max_ms'][1]:6.2f}] ms"
                  f"  ready wait {s['ready_wait_max_ms'][0]:6.2f} [{s['ready_wait_max_ms'][1]:6.2f}] ms"
                  f"  worst/median {s['response_max_over_median'][0]:5.2f} [{s['response_max_over_median'][1]:5.2f}]"
                  f"  foreign {s['foreign_cpu_ms'][0]:7.2f} ms, named {s['runs_named']}/{s['runs']}"
                  f"  host stall {s['host_stall_ms'][0]:5.2f} [{s['host_stall_ms'][1]:5.2f}] ms")
    write_json(args.out, {"model": args.model, "model_ms": model_ms, "json_ms": json_ms, "cores": cores,
                          "load_average_end": os.getloadavg()[0], "runs": rows, "summary": summary}, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
