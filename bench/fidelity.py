"""How good are the planner's predictions where the model runs? Judged against references
we did not write: plain ONNX Runtime sessions (the plan's slices, each an
`onnxruntime.InferenceSession` with only the device's threads, core affinity and
precision set, ONNX Runtime's defaults for the rest; an OpenVINO device's slice a plain
compiled model with only its threads and precision set) timed with `time.perf_counter`
around the chain of `session.run` calls, in steady state (back to back) and at the
profile's rate (an idle gap before each run).

For every model (the light models in the onnx package and generated ones of other
shapes: a wide MLP with large weights, a deep thin CNN, a branching net), every device
set (1-thread pinned; multi-thread; big/little/int8 clusters) and every regime:
profile in that regime (`planner profile`'s code), plan for latency (dp), verify
(`planner solve --verify K`: the plan, its K next-best and the single devices run end
to end by our executor), then time the references in interleaved, shuffled rounds.

Printed per case: the plan, its predicted latency against the reference, the verified
figure against the reference, the fastest plain single device, and a paired sign test
of the returned plan against it (never measurably slower). The noise floor is the
reference of the returned plan built twice and timed in the same rounds; the host drift
is the first device's plain session timed around profiling and again in the reference
rounds (a host that changes speed between the two moves every error by that much, which
the floor cannot show). Writes bench/results/fidelity.json with the host it ran on.

    .venv/bin/python bench/fidelity.py                       # defaults: a subset, every device set and regime
    .venv/bin/python bench/fidelity.py --models all --runs 12 --exec-runs 40
"""

from __future__ import annotations

import argparse
import os
import platform as pyplatform
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from executor import harness  # noqa: E402
from executor.profiler import profile_model  # noqa: E402
from executor.runtime import PROCESS_CORES, parse_devices  # noqa: E402
from executor.slicing import layers, load_model, materialise, random_inputs  # noqa: E402
from planner_cli.commands.profile import build_documents  # noqa: E402
from planner.core.io import parse  # noqa: E402
from planner.core.schema import ModelProfile, PlanRequest, Platform  # noqa: E402
from planner.plan import make_plan  # noqa: E402
from planner.verify import STEADY_SETTLE, measure_on_device, sign_test_p, verify_plan  # noqa: E402
from tests.support.genmodels import GENERATED  # noqa: E402

REFERENCE = str(ROOT / "bench" / "reference.py") + ":PlainChain"

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = ["squeezenet", "shufflenet", "resnet50", "inception_v1", "inception_v2", "densenet121",
                "bvlc_alexnet", "zfnet512", "vgg19"]
ALL = LIGHT_MODELS + list(GENERATED)
DEFAULT = ["squeezenet", "shufflenet", "inception_v1", "wide_mlp", "deep_thin_cnn", "branching_net"]
CORES = sorted(PROCESS_CORES)


def device_sets() -> dict[str, list[str]]:
    """The device sets, laid on the cores this process has (16 on the quiet host,
    2 here): one-thread pinned devices; multi-thread devices; big/little/int8 clusters."""
    n = len(CORES)
    c = lambda i: CORES[min(i, n - 1)]  # noqa: E731
    big = f"{c(0)}-{c(max(0, n // 4 - 1))}" if n >= 8 else f"{c(0)}-{c(1)}" if n >= 2 else f"{c(0)}"
    big_threads = max(1, n // 4) if n >= 8 else min(2, n)
    little, q8a, q8b = c(n // 2), c(n - 4 if n >= 8 else 0), c(n - 3 if n >= 8 else 1)
    return {
        "pinned-1t": [f"cpu1=CPUExecutionProvider:threads=1,affinity={c(0)}",
                      f"cpu1b=CPUExecutionProvider:threads=1,affinity={c(1)},opt=basic",
                      f"q8=CPUExecutionProvider:threads=1,affinity={c(1)},precision=int8"],
        "multi-thread": ["cpu1=CPUExecutionProvider:threads=1",
                         f"cpu2=CPUExecutionProvider:threads={min(2, n)}",
                         f"q8=CPUExecutionProvider:threads={min(2, n)},precision=int8"],
        "openvino": [f"ort1=CPUExecutionProvider:threads=1,affinity={c(0)}",  # the two runtimes side by side
                     f"ov1=openvino:CPU,threads=1,affinity={c(1)}",
                     f"ovb=openvino:CPU,threads=1,affinity={c(0)},precision=bf16"],
        "clusters": [f"big=CPUExecutionProvider:threads={big_threads},affinity={big}",
                     f"little=CPUExecutionProvider:threads=1,affinity={little}",
                     f"q8=CPUExecutionProvider:threads={min(2, n)},affinity={q8a}-{q8b},precision=int8"
                     if q8b > q8a else f"q8=CPUExecutionProvider:threads=1,affinity={q8a},precision=int8"],
    }


def load(name: str, seed: int):
    if name in GENERATED:  # weights are initializers already; materialise infers the tensors' shapes (their bytes)
        model = materialise(GENERATED[name](seed=seed))
    else:
        model = materialise(load_model(LIGHT / f"light_{name}.onnx"), "random", seed)
    return layers(model, materialised=True)


def time_references(lm, devices, feed, chains: dict, runs: int, rate_hz: float | None, seed: int,
                    aa: str | None = None):
    """Plain-runtime references (bench/reference.py's PlainChain: name -> slices), each in
    its own pinned worker of the measurement harness (executor.harness), `runs` shuffled
    rounds: back to back a turn is STEADY_SETTLE untimed runs then STEADY_BLOCK timed ones
    whose median is the round's figure; at a rate each timed run (two a turn) follows an idle gap of one
    period. name -> round figures; and the harness's A-A of `aa` (that reference timed by a
    second, independent worker in the same rounds), with `process_spread_pct`: per reference,
    how far apart the worker processes that took its rounds in turn came out."""
    jobs = {name: harness.Job.of(sl, REFERENCE) for name, sl in chains.items()}
    m = harness.measure(lm, devices, feed, jobs, rounds=runs, settle=STEADY_SETTLE,
                        rate_hz=rate_hz, seed=seed, aa=aa, calibration_seed=0)
    if m.aa is not None:
        m.aa["process_spread_pct"] = {name: j.spread_pct for name, j in m.jobs.items()}
        m.aa["processes"] = {name: j.replicas for name, j in m.jobs.items()}
        m.aa["figure_se_pct"] = {name: j.se_pct for name, j in m.jobs.items()}
    return {name: list(j.items[0].rounds_ms) for name, j in m.jobs.items()}, m.aa


def sign_test(a_ms, b_ms) -> dict:
    """Paired by round: is `a` measurably slower than `b` (one-sided sign test, p < 0.05)?
    The verification's own test (planner.verify.sign_test_p), asked whether `b` is faster."""
    n = min(len(a_ms), len(b_ms))
    p = sign_test_p(list(b_ms[:n]), list(a_ms[:n]))
    return {"rounds": n, "slower_in": sum(1 for x, y in zip(a_ms[:n], b_ms[:n]) if x > y), "p_value": p,
            "measurably_slower": p < 0.05}


def pct(measured: float, predicted: float) -> float:
    """(measured - predicted) / predicted: positive = slower than predicted."""
    return 100.0 * (measured - predicted) / predicted


def bench_case(name: str, set_name: str, specs: list[str], rate_hz: float | None, args) -> dict:
    devices = parse_devices(specs)
    lm = load(name, args.seed)
    L = len(lm.layers)
    feed = random_inputs(lm, args.seed + 100)
    # The host's drift: the first device's plain session, timed just before the profile, just
    # after the verification and in the reference rounds (as that device's single reference).
    # The harness's A-A is measured within the reference rounds only; a host that changes
    # speed between profiling and the references (a VM's neighbours, a CPU's speed modes)
    # moves every prediction error by this much, and the A-A cannot show it.
    canary = {"canary": [(0, L - 1, devices[0].id)]}
    drift_rounds = max(3, args.exec_runs // 4)
    phases_s: dict[str, float] = {}  # where a case's time goes (quiet_host sizes its budget on these)
    t_case = time.perf_counter()

    def done(phase: str, t0: float) -> None:
        phases_s[phase] = round(time.perf_counter() - t0, 1)
        print(f"  {name} {set_name} {'back to back' if rate_hz is None else f'{rate_hz:g} Hz'}: {phase} "
              f"{phases_s[phase]:.0f} s ({time.perf_counter() - t_case:.0f} s into the case)", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    around = time_references(lm, devices, feed, canary, drift_rounds, rate_hz, args.seed)[0]["canary"]
    done("drift before", t0)
    t0 = time.perf_counter()
    prof = profile_model(lm, devices, runs=args.runs, warmup=2, seed=args.seed, rate_hz=rate_hz)
    profiling_s = time.perf_counter() - t0
    done("profile", t0)
    plat_doc, prof_doc, _ = build_documents(lm, prof, name=name, platform_name=set_name, energy_source="none: bench",
                                            model_path=name, weights="random", seed=args.seed)
    platform, profile = parse(Platform, plat_doc, "platform"), parse(ModelProfile, prof_doc, "profile")
    request = PlanRequest(objective="latency", solver="dp", compare_baselines=False)
    plan = make_plan(platform, profile, request)
    t0 = time.perf_counter()
    verified = verify_plan(platform, profile, request, args.verify, measure_on_device(lm, devices, feed, args.seed),
                           runs=args.verify_runs, plan=plan)
    done("verification", t0)
    t0 = time.perf_counter()
    after = time_references(lm, devices, feed, canary, drift_rounds, rate_hz, args.seed + 1)[0]["canary"]
    done("drift after", t0)
    sl = lambda p: [(s.first_index, s.last_index, s.device) for s in p.slices]  # noqa: E731
    chains = {"plan": sl(plan)}
    if verified.notation != plan.notation:
        chains["verified"] = sl(verified)
    ver_name = "verified" if "verified" in chains else "plan"
    for d in devices:
        chains[f"single-{d.id}"] = [(0, L - 1, d.id)]
    t0 = time.perf_counter()
    samples, aa = time_references(lm, devices, feed, chains, args.exec_runs, rate_hz, args.seed, aa=ver_name)
    done("references", t0)
    med = {k: float(np.median(v)) for k, v in samples.items()}
    at_prediction = float(np.median(around + after))
    singles = {k: v for k, v in med.items() if k.startswith("single-")}
    best_single = min(singles, key=singles.get)
    v = verified.verification
    chosen = next(c for c in v.candidates if c.name == v.chosen)
    plan_by_executor = next(c for c in v.candidates if c.name == "plan")
    runtime_of = {d["symbol"]: next(x.runtime for x in devices if x.id == d["id"]) for d in plat_doc["devices"]}

    def runtimes_in(notation: str) -> set[str]:  # "O1 OVB4": symbol + first layer (1-based) per slice
        return {runtime_of[max((s for s in runtime_of if t.startswith(s) and t[len(s):].isdigit()), key=len)]
                for t in notation.split()}
    mixed = [{"notation": c.notation, "predicted_ms": c.predicted_ms, "measured_ms": c.measured_ms,
              "error_pct": c.error_pct} for c in v.candidates if len(runtimes_in(c.notation)) > 1]
    predicted = plan.metrics.latency_ms
    # Each device's drift between two moments: its plain one-slice run as the profile measured
    # it (the unsplit model's own worker) and as the references measure it now; on the 2-core VM
    # a core's speed moved by tens of percent over minutes (bench/harness_aa.py "moments"),
    # which no measurement inside one moment can remove. A plan's drift weighs its devices'
    # by its predicted slice times; the error net of it is the planner's own.
    profiled = {d.id: float(np.median(prof.times[d.id].whole_ms)) for d in devices}
    device_drift = {d.id: pct(med[f"single-{d.id}"], profiled[d.id]) for d in devices}
    plan_drift = _weighted_drift(plan, device_drift)
    # the same between the verification's single-device figures and the references
    ver_single = {c.name[len("single-"):]: c.measured_ms for c in v.candidates if c.name.startswith("single-")}
    if len(plan.slices) == 1:
        ver_single.setdefault(plan.slices[0].device, plan_by_executor.measured_ms)
    ver_drift = {d: pct(med[f"single-{d}"], ms) for d, ms in ver_single.items()}
    verified_drift = _weighted_drift(verified, ver_drift)
    return {
        "model": name, "layers": L, "device_set": set_name, "devices": specs,
        "regime": "back_to_back" if rate_hz is None else f"{rate_hz:g} Hz",
        "profiling_s": profiling_s, "phases_s": phases_s,
        "plan": plan.notation, "plan_slices": len(plan.slices), "predicted_ms": predicted, "reference_ms": med["plan"],
        "prediction_error_pct": pct(med["plan"], predicted),
        # the error split: composition = the plan timed as slices by our executor (the
        # verification's "plan" candidate, in the harness) against its prediction composed
        # from the profile; runner = the plain-runtime reference against that executor
        # figure (another runner and process, in % of the prediction); noise = the harness's
        # A-A of the reference. composition + runner = the prediction error.
        "composition_error_pct": pct(plan_by_executor.measured_ms, predicted),
        "runner_error_pct": 100.0 * (med["plan"] - plan_by_executor.measured_ms) / predicted,
        "verified_plan": verified.notation, "verified_chosen": v.chosen, "verified_measured_ms": chosen.measured_ms,
        "verified_reference_ms": med[ver_name], "verified_error_pct": pct(med[ver_name], chosen.measured_ms),
        "verification": [c.model_dump() for c in v.candidates],
        "device_drift_pct": device_drift, "plan_drift_pct": plan_drift,
        "error_net_of_drift_pct": pct(med["plan"], predicted) - plan_drift,
        "verified_drift_pct": verified_drift,
        "verified_error_net_of_drift_pct": None if verified_drift is None else
        pct(med[ver_name], chosen.measured_ms) - verified_drift,
        "harness_aa": aa,
        "noise_floor_pct": aa["aa_pct"],
        # the reference workers of one configuration against each other (each took some rounds)
        "process_spread_pct": max(aa["process_spread_pct"].values()),
        # the most worker processes a reference took (more where its processes disagreed)
        "processes_max": max(aa["processes"].values()),
        # + = the host ran the same session slower in the reference rounds than around profiling
        "host_drift_pct": pct(med[f"single-{devices[0].id}"], at_prediction),
        "host_drift_within_prediction_pct": pct(float(np.median(after)), float(np.median(around))),
        "single_reference_ms": singles, "best_single": best_single,
        "speedup_over_best_single": singles[best_single] / med[ver_name],
        # a one-device plan on the best single device is that device's configuration timed
        # twice: their difference is the noise floor, not a slower plan
        "slower_than_best_single": (
            {**sign_test(samples[ver_name], samples[best_single]), "measurably_slower": False, "same_configuration": True}
            if len(verified.slices) == 1 and best_single == f"single-{verified.slices[0].device}"
            else sign_test(samples[ver_name], samples[best_single])),
        "mixed_runtime_candidates": mixed,  # verified candidates whose slices run on more than one runtime
    }


def _weighted_drift(plan, drift: dict) -> float | None:
    """A plan's drift: its devices' drifts weighted by its predicted slice times (None where
    a device's drift was not measured)."""
    parts = [(s.time_ms, drift.get(s.device)) for s in plan.slices]
    if any(x is None for _, x in parts) or not sum(t for t, _ in parts):
        return None
    return sum(t * x for t, x in parts) / sum(t for t, _ in parts)


def summarise(rows: list[dict]) -> dict:
    def stats(key):
        e = [abs(r[key]) for r in rows]
        return {"mean_abs_pct": float(np.mean(e)), "worst_abs_pct": float(np.max(e))} if e else {}
    aa = [r["noise_floor_pct"] for r in rows]
    net = [abs(r["error_net_of_drift_pct"]) for r in rows]
    vnet = [abs(r["verified_error_net_of_drift_pct"]) for r in rows if r.get("verified_error_net_of_drift_pct") is not None]
    return {"cases": len(rows), "prediction": stats("prediction_error_pct"), "verified": stats("verified_error_pct"),
            "composition": stats("composition_error_pct"), "runner": stats("runner_error_pct"),
            "plan_drift": stats("plan_drift_pct"),
            "net_of_drift": {"mean_abs_pct": float(np.mean(net)), "worst_abs_pct": float(np.max(net)),
                             "within_10pct": sum(e <= 10 for e in net)} if net else {},
            "verified_net_of_drift": {"mean_abs_pct": float(np.mean(vnet)), "worst_abs_pct": float(np.max(vnet)),
                                      "within_10pct": sum(e <= 10 for e in vnet)} if vnet else {},
            "within_10pct": sum(abs(r["prediction_error_pct"]) <= 10 for r in rows),
            "verified_within_10pct": sum(abs(r["verified_error_pct"]) <= 10 for r in rows),
            "aa_median_pct": float(np.median(aa)) if aa else None, "aa_worst_pct": float(np.max(aa)) if aa else None,
            "process_spread_median_pct": float(np.median([r["process_spread_pct"] for r in rows])) if rows else None,
            "noise_floor_mean_pct": float(np.mean([r["noise_floor_pct"] for r in rows])) if rows else None,
            "noise_floor_worst_pct": float(np.max([r["noise_floor_pct"] for r in rows])) if rows else None,
            "host_drift_mean_abs_pct": float(np.mean([abs(r["host_drift_pct"]) for r in rows])) if rows else None,
            "host_drift_worst_abs_pct": float(np.max([abs(r["host_drift_pct"]) for r in rows])) if rows else None,
            "measurably_slower_than_best_single": [f"{r['model']}/{r['device_set']}/{r['regime']}" for r in rows
                                                   if r["slower_than_best_single"]["measurably_slower"]]}


def write(out: str, host: dict, args, rows: list[dict], finished: bool) -> dict:
    """The JSON as it stands: after every case (`finished` false) and at the end; written
    whole to a temporary file, then renamed, so a reader never sees half a file."""
    summary = {"all": summarise(rows)}
    for key in ("device_set", "regime"):
        for val in dict.fromkeys(r[key] for r in rows):
            summary[f"{key}={val}"] = summarise([r for r in rows if r[key] == val])
    host["loadavg_at_end"] = os.getloadavg()
    write_json(out, {"host": host, "args": vars(args), "finished": finished, "summary": summary, "cases": rows})
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT), help=f"comma list or 'all' ({', '.join(ALL)}); default %(default)s")
    ap.add_argument("--sets", default="pinned-1t,multi-thread,clusters",
                    help="device sets: pinned-1t, multi-thread, clusters, openvino (ONNX Runtime and OpenVINO devices "
                         "side by side; plans may mix them) (default %(default)s)")
    ap.add_argument("--rate", type=float, default=20.0, help="the at-a-rate regime in Hz; 0: back to back only (default %(default)s)")
    ap.add_argument("--runs", type=int, default=8, help="profiling rounds (default %(default)s)")
    ap.add_argument("--exec-runs", type=int, default=30, help="timed rounds of the references (default %(default)s)")
    ap.add_argument("--verify", type=int, default=2, help="next-best candidates verified (default %(default)s)")
    ap.add_argument("--verify-runs", type=int, default=15, help="timed runs per verified candidate (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="seed of weights, inputs and round order (default %(default)s)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/fidelity.json"), help="JSON results (default %(default)s)")
    args = ap.parse_args()
    names = ALL if args.models == "all" else [m.strip() for m in args.models.split(",") if m.strip()]
    sets = device_sets()
    bad = [m for m in names if m not in ALL] + [s for s in args.sets.split(",") if s not in sets]
    if bad:
        ap.error(f"unknown model(s) or device set(s): {', '.join(bad)}")
    names = [m for m in names if m in GENERATED or (LIGHT / f"light_{m}.onnx").exists()]
    regimes = [None] + ([args.rate] if args.rate > 0 else [])
    host = {"node": pyplatform.node(), "cpus_usable": len(CORES), "cpus": os.cpu_count(), "onnxruntime": ort.__version__,
            "python": pyplatform.python_version(), "loadavg_at_start": os.getloadavg()}
    if "openvino" in args.sets.split(","):
        host["openvino"] = __import__("openvino").get_version().split("-")[0]
    print(f"host {host['node']}: {host['cpus_usable']} usable of {host['cpus']} CPUs, onnxruntime {ort.__version__}, "
          f"load average {host['loadavg_at_start'][0]:.1f} at start")
    print("errors: (measured - predicted) / predicted, positive = slower than predicted; reference = plain ONNX Runtime "
          "sessions of the plan's slices timed with time.perf_counter; verified = the measured best of the plan, its "
          f"{args.verify} next-best and the single devices (planner solve --verify); comp = composition: the plan "
          "timed as slices by our executor against its prediction composed from the profile; run = runner: the plain "
          "reference against our executor's figure (in % of the prediction; comp + run = err; minutes apart, so it holds the host's drift between the two); noise = the harness's "
          "A-A, the returned plan's reference timed by two independent sets of workers in the same rounds; procs = how far apart the worker processes that took a reference's rounds in turn came out (the widest of the case's references); n = the most worker processes a reference took (3, more where they disagreed: executor.harness ADAPT_SE_PCT); drift = the "
          "plan's devices' plain one-slice runs in the reference rounds against the same runs in the profile (weighted "
          "by the plan's slice times; + = the host got slower since profiling); net = err - drift, the planner's own. Every figure is timed by "
          "the measurement harness (executor.harness: each configuration in its own pinned worker process)")
    head = (f"{'model':<14} {'set':<12} {'regime':<8} {'plan':<16} {'pred_ms':>8} {'ref_ms':>8} {'err':>7} {'comp':>7} "
            f"{'run':>7} "
            f"{'verified':<16} {'ver_ms':>8} {'ref_ms':>8} {'err':>7} {'noise':>6} {'procs':>6} {'n':>3} {'drift':>7} {'net':>7} {'best single':>18} "
            f"{'vs it':>6}")
    print(head)
    rows = []
    for m in names:
        for s in args.sets.split(","):
            for rate in regimes:
                r = bench_case(m, s, sets[s], rate, args)
                rows.append(r)
                slow = "SLOWER" if r["slower_than_best_single"]["measurably_slower"] else f"{r['speedup_over_best_single']:.2f}x"
                print(f"{m:<14} {s:<12} {r['regime']:<8} {r['plan'][:16]:<16} {r['predicted_ms']:>8.3f} {r['reference_ms']:>8.3f} "
                      f"{r['prediction_error_pct']:>+6.1f}% {r['composition_error_pct']:>+6.1f}% "
                      f"{r['runner_error_pct']:>+6.1f}% {r['verified_plan'][:16]:<16} {r['verified_measured_ms']:>8.3f} "
                      f"{r['verified_reference_ms']:>8.3f} {r['verified_error_pct']:>+6.1f}% {r['noise_floor_pct']:>5.1f}% "
                      f"{r['process_spread_pct']:>5.1f}% {r['processes_max']:>3} {r['plan_drift_pct']:>+6.1f}% {r['error_net_of_drift_pct']:>+6.1f}% "
                      f"{r['best_single'] + ' ' + format(r['single_reference_ms'][r['best_single']], '.3f'):>18} {slow:>6}",
                      flush=True)
                for c in r["mixed_runtime_candidates"]:
                    print(f"{'':<14} mixed runtimes: {c['notation']:<24} predicted {c['predicted_ms']:.3f} ms, measured "
                          f"{c['measured_ms']:.3f} ms by the executor ({c['error_pct']:+.1f}%)", flush=True)
                write(args.out, host, args, rows, finished=False)  # a stopped run keeps its finished cases
    summary = write(args.out, host, args, rows, finished=True)
    print()
    for k, q in summary.items():
        if not q["cases"]:
            continue
        print(f"{k:<26} {q['cases']:>3} cases: prediction mean |err| {q['prediction']['mean_abs_pct']:.1f}%, worst "
              f"{q['prediction']['worst_abs_pct']:.1f}%, within 10% {q['within_10pct']} of {q['cases']} (split: "
              f"composition mean |err| {q['composition']['mean_abs_pct']:.1f}%, runner {q['runner']['mean_abs_pct']:.1f}%); "
              f"verified mean |err| {q['verified']['mean_abs_pct']:.1f}%, worst "
              f"{q['verified']['worst_abs_pct']:.1f}%, within 10% {q['verified_within_10pct']} of {q['cases']}; harness "
              f"A-A median {q['aa_median_pct']:.1f}%, worst {q['aa_worst_pct']:.1f}% (worker processes of one reference "
              f"apart by {q['process_spread_median_pct']:.1f}% median); net of the plan's devices' drift: "
              f"prediction mean |err| {q['net_of_drift']['mean_abs_pct']:.1f}%, worst {q['net_of_drift']['worst_abs_pct']:.1f}%, "
              f"within 10% {q['net_of_drift']['within_10pct']} of {q['cases']}"
              + (f"; verified {q['verified_net_of_drift']['mean_abs_pct']:.1f}% / "
                 f"{q['verified_net_of_drift']['worst_abs_pct']:.1f}%" if q['verified_net_of_drift'] else "")
              + f"; host drift (first device) mean "
              f"{q['host_drift_mean_abs_pct']:.1f}%, worst "
              f"{q['host_drift_worst_abs_pct']:.1f}%; measurably slower than the best plain single device: "
              f"{', '.join(q['measurably_slower_than_best_single']) or 'none'}")
    print(f"load average at end {host['loadavg_at_end'][0]:.1f} on {host['cpus']} CPUs")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
