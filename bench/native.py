"""The native board agent (native/, hp-agent) against the plain runtime and the Python executor.

1. One-slice plan: hp-agent running the plan's bundle back to back against hp-plain, a
   minimal C++ program running the whole model in one OpenVINO compiled model with the
   same settings (target, properties, cores). Per-frame median and peak resident memory
   (VmHWM) of each process; `one_slice_time_ratio` = native / plain, `rss_ratio` alike.
   Targets: <= 1.02 and <= 1.3.
2. Multi-slice plan (the model cut in SLICES, alternating two one-thread devices on cores
   0 and 1): hp-agent against the Python executor (`planner bundle --run`) on the same
   bundle. An executor's per-slice overhead is (its frame median - the slices' own compute)
   / slices, the compute taken two ways: in the chain (the median of each slice's bare
   `infer()` inside hp-agent's frames: the same slices with the same settings, in the caches
   and on the cores a chain leaves them; `overhead_ratio`), and alone (hp-plain on each
   slice file by itself, back to back: warm caches no chain has; `overhead_ratio_alone`).
   Pinning each slice to its device's cores is overhead in both executors alike.
   Target: native <= half the Python executor's.
3. A bundle swap mid-run: hp-agent at RATE_HZ against a scripted service (tests/support/
   native.py) whose plan is switched SWAPS times between the two bundles; every frame run
   must arrive as a telemetry sample (frames_lost = frames - samples posted = 0).

The runs are separate processes timed by their own clocks (what is compared is whole
processes: a C++ agent, a C++ program, a Python interpreter), interleaved ABAB over ROUNDS
rounds so the machine's drift falls on both; each figure is the median over rounds.
Writes bench/results/native.json.

    python bench/native.py [--model squeezenet] [--frames 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

import onnx  # noqa: E402

from executor.bundle import make_bundle  # noqa: E402
from executor.slicing import layers, load_model, materialise  # noqa: E402

AGENT = ROOT / "native" / "build" / "hp-agent"
PLAIN = ROOT / "native" / "build" / "hp-plain"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ONE = ["cpu1=openvino:CPU,threads=1,affinity=0"]
TWO = ["cpu1=openvino:CPU,threads=1,affinity=0", "cpu2=openvino:CPU,threads=1,affinity=1"]
SLICES = 4
RATE_HZ = 50.0
SWAPS = 4


def plan_of(lm, n: int, plan_id: str) -> dict:  # noqa: ANN001
    """n slices of about equal layer counts, alternating cpu1 and cpu2 (cpu1 alone for n=1)."""
    ids = [layer.id for layer in lm.layers]
    cuts = [round(k * len(ids) / n) for k in range(n + 1)]
    slices = [{"index": k, "first_index": cuts[k], "last_index": cuts[k + 1] - 1, "first_layer": ids[cuts[k]],
               "last_layer": ids[cuts[k + 1] - 1], "device": "cpu1" if k % 2 == 0 else "cpu2"} for k in range(n)]
    return {"id": plan_id, "plan": {"slices": slices, "layers": [{"layer": i} for i in ids]}}


def run_json(cmd: list[str], timeout_s: float = 600) -> dict:
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed ({out.returncode}): {out.stderr.strip()[-800:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def native_run(bundle: Path, frames: int, warmup: int) -> dict:
    s = run_json([str(AGENT), "--bundle", str(bundle), "--frames", str(frames), "--warmup", str(warmup), "--rate", "0"])
    return {"frame_ms": s["frame_ms_median"], "rss_mb": s["peak_rss_kb"] / 1024, "slice_ms": s["slice_ms_median"],
            "infer_ms": s["infer_ms_median"]}


def plain_run(model: Path, bundle: Path, slice_index: int, frames: int, warmup: int) -> dict:
    s = run_json([str(PLAIN), "--model", str(model), "--manifest", str(bundle / "manifest.json"), "--slice",
                  str(slice_index), "--frames", str(frames), "--warmup", str(warmup)])
    return {"frame_ms": s["frame_ms_median"], "rss_mb": s["peak_rss_kb"] / 1024}


def python_run(bundle: Path, frames: int, warmup: int) -> dict:
    s = run_json([sys.executable, "-m", "planner_cli", "bundle", "--run", str(bundle), "--frames", str(frames),
                  "--warmup", str(warmup), "--json"])
    return {"frame_ms": s["frame_ms_median"], "rss_mb": s["peak_rss_kb"] / 1024, "slice_ms": s["slice_ms_median"]}


def swap_run(one: tuple[Path, dict], many: tuple[Path, dict], cache: Path) -> dict:
    """hp-agent at RATE_HZ against the scripted service, its plan switched SWAPS times."""
    from tests.support.native import ScriptedService

    svc = ScriptedService()
    svc.add("p-one", *one)
    svc.add("p-many", *many)
    svc.activate("p-one", 1)
    proc = subprocess.Popen([str(AGENT), "--server", svc.url, "--deployment", "cam", "--rate", str(RATE_HZ), "--batch-s",
                             "0.25", "--poll-wait", "1", "--cache", str(cache)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        plans = ["p-one", "p-many"]
        for k in range(SWAPS + 1):
            plan = plans[k % 2]
            deadline = time.monotonic() + 60
            start = svc.samples(plan)
            while svc.samples(plan) < start + int(RATE_HZ):  # about a second's frames on it
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"swap run: no samples on {plan}")
                time.sleep(0.05)
            if k < SWAPS:
                svc.activate(plans[(k + 1) % 2], k + 2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        stats = json.loads(out.strip().splitlines()[-1])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        svc.httpd.shutdown()
    posted = sum(len(b["samples"]) for b in svc.batches)
    return {"swaps": stats["swaps"] - 1, "frames": stats["frames"], "samples_posted": posted,
            "frames_lost": stats["frames"] - posted, "failed_frames": stats["failed_frames"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="squeezenet",
                    help="a light model of the onnx package (light_NAME.onnx; default %(default)s)")
    ap.add_argument("--frames", type=int, default=200, help="timed frames a round (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=30, help="untimed frames before them (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of each program (default %(default)s)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "native.json"), help="JSON (default %(default)s)")
    args = ap.parse_args()
    if not (AGENT.is_file() and PLAIN.is_file()):
        raise SystemExit("bench/native.py: build the native agent first (make native)")
    with tempfile.TemporaryDirectory(prefix="bench-native-") as tmp:
        tmp = Path(tmp)
        lm = layers(materialise(load_model(LIGHT / f"light_{args.model}.onnx"), "computed", 0), materialised=True)
        whole = tmp / "whole.onnx"
        onnx.save(lm.model, str(whole))
        one = tmp / "one"
        many = tmp / "many"
        m_one = make_bundle(plan_of(lm, 1, "p-one"), lm.model, ONE, one)
        m_many = make_bundle(plan_of(lm, SLICES, "p-many"), lm.model, TWO, many)
        cuts = ", ".join(f"{s['first_index']}-{s['last_index']}@{s['device']}" for s in m_many["slices"])
        print(f"{args.model}: {len(lm.layers)} layers; one-slice bundle and a {SLICES}-slice bundle "
              f"({cuts}); "
              f"{args.rounds} rounds x {args.frames} frames (+{args.warmup} warm-up), back to back")
        rows: dict[str, list[dict]] = {"plain": [], "native_one": [], "native_many": [], "python_many": [],
                                       "compute": []}
        for r in range(args.rounds):
            rows["plain"].append(plain_run(whole, one, 0, args.frames, args.warmup))
            rows["native_one"].append(native_run(one, args.frames, args.warmup))
            rows["native_many"].append(native_run(many, args.frames, args.warmup))
            rows["python_many"].append(python_run(many, args.frames, args.warmup))
            rows["compute"].append({"slice_ms": [plain_run(many / s["file"], many, k, args.frames, args.warmup)["frame_ms"]
                                                 for k, s in enumerate(m_many["slices"])]})
            print(f"  round {r + 1}: plain {rows['plain'][-1]['frame_ms']:.3f} ms, native one-slice "
                  f"{rows['native_one'][-1]['frame_ms']:.3f} ms; {SLICES} slices: native "
                  f"{rows['native_many'][-1]['frame_ms']:.3f} ms, python {rows['python_many'][-1]['frame_ms']:.3f} ms, "
                  f"slices in the chain {sum(rows['native_many'][-1]['infer_ms']):.3f} ms, alone "
                  f"{sum(rows['compute'][-1]['slice_ms']):.3f} ms")
        swap = swap_run((one, m_one), (many, m_many), tmp / "cache")

    def med(key: str, field: str) -> float:
        return median(x[field] for x in rows[key])

    alone_ms = sum(median(x["slice_ms"][k] for x in rows["compute"]) for k in range(SLICES))
    chain_ms = sum(median(x["infer_ms"][k] for x in rows["native_many"]) for k in range(SLICES))

    def overheads(compute_ms: float) -> tuple[float, float, float | None]:
        native = (med("native_many", "frame_ms") - compute_ms) / SLICES
        python = (med("python_many", "frame_ms") - compute_ms) / SLICES
        return native, python, (native / python if python > 0 else None)

    over_native, over_python, over_ratio = overheads(chain_ms)
    alone_native, alone_python, alone_ratio = overheads(alone_ms)
    time_ratios = [n["frame_ms"] / p["frame_ms"] for n, p in zip(rows["native_one"], rows["plain"])]
    result = {
        "model": args.model, "frames": args.frames, "warmup": args.warmup, "rounds": args.rounds,
        "one_slice": {"plain_frame_ms": med("plain", "frame_ms"), "native_frame_ms": med("native_one", "frame_ms"),
                      "plain_rss_mb": med("plain", "rss_mb"), "native_rss_mb": med("native_one", "rss_mb"),
                      "time_ratio_per_round": time_ratios},
        "one_slice_time_ratio": median(time_ratios),
        "rss_ratio": med("native_one", "rss_mb") / med("plain", "rss_mb"),
        "multi_slice": {"slices": SLICES, "compute_in_chain_ms": chain_ms, "compute_alone_ms": alone_ms,
                        "native_frame_ms": med("native_many", "frame_ms"), "python_frame_ms": med("python_many", "frame_ms"),
                        "native_rss_mb": med("native_many", "rss_mb"), "python_rss_mb": med("python_many", "rss_mb"),
                        "native_overhead_per_slice_ms": over_native, "python_overhead_per_slice_ms": over_python,
                        "overhead_ratio": over_ratio, "native_overhead_per_slice_alone_ms": alone_native,
                        "python_overhead_per_slice_alone_ms": alone_python, "overhead_ratio_alone": alone_ratio},
        "swap": swap,
        "targets": {"one_slice_time_ratio": 1.02, "rss_ratio": 1.3, "overhead_ratio": 0.5, "frames_lost": 0},
    }
    ms = result["multi_slice"]
    result["met"] = {"one_slice_time_ratio": result["one_slice_time_ratio"] <= 1.02, "rss_ratio": result["rss_ratio"] <= 1.3,
                     "overhead_ratio": ms["overhead_ratio"] is not None and ms["overhead_ratio"] <= 0.5,
                     "frames_lost": swap["frames_lost"] == 0 and swap["failed_frames"] == 0}
    o = result["one_slice"]
    print(f"one slice:   plain {o['plain_frame_ms']:.3f} ms / {o['plain_rss_mb']:.1f} MB   native {o['native_frame_ms']:.3f} ms "
          f"/ {o['native_rss_mb']:.1f} MB   time ratio {result['one_slice_time_ratio']:.3f} (target <= 1.02), "
          f"rss ratio {result['rss_ratio']:.3f} (target <= 1.3)")
    print(f"{SLICES} slices:    compute in the chain {chain_ms:.3f} ms, alone {alone_ms:.3f} ms   native {ms['native_frame_ms']:.3f} ms / "
          f"{ms['native_rss_mb']:.1f} MB   python {ms['python_frame_ms']:.3f} ms / {ms['python_rss_mb']:.1f} MB")
    def fmt(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    print(f"overhead per slice (compute in the chain): native {over_native:.4f} ms, python {over_python:.4f} ms, ratio "
          f"{fmt(over_ratio)} (target <= 0.5)")
    print(f"overhead per slice (compute alone):        native {alone_native:.4f} ms, python {alone_python:.4f} ms, ratio "
          f"{fmt(alone_ratio)}")
    print(f"swap: {swap['swaps']} swaps at {RATE_HZ:g} Hz, {swap['frames']} frames, {swap['samples_posted']} samples posted, "
          f"{swap['frames_lost']} lost, {swap['failed_frames']} failed")
    print("met: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in result["met"].items()))
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
