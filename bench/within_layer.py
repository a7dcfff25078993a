"""Within-layer planning figures (issue 6), on the shipped generated data.

muLayer (Fig. 16, Exynos 7420-like platform): latency of the mulayer plan against the
single-processor mechanism (best data type per processor) and the layer-to-processor
mechanism (QUInt8, as the paper compares; and the communication-aware optimum over
every single (processor, dtype) target), in percent of the layer-to-processor
latency; Fig. 17's steps (F32 only, no branch distribution); energy beside.

AsyMo (Kirin 970 CPU): predicted speed-up of big+little over big-only (and
little-only) per network at the highest frequencies, for the paper's split by
measured capability and for the balanced split; the energy-first frequency and its
saving over latency-first; the cost model's fit (R^2, 10-fold CV).

Every number is the shared evaluator's, on generated profiles: illustrations of the
method, not reproductions of the papers' measurements. Prints tables, writes
bench/results/within_layer.json.

    .venv/bin/python bench/within_layer.py
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.core.asymo_schema import AsymoCpu, AsymoNetwork  # noqa: E402
from planner.core.io import load  # noqa: E402
from planner.progress import track  # noqa: E402
from planner.plan import make_plan  # noqa: E402
from planner.core.schema import ModelProfile, PlanRequest, Platform  # noqa: E402

MUL = ROOT / "profiles" / "mulayer"
ASY = ROOT / "profiles" / "asymo"
MULAYER_NETS = ["googlenet", "squeezenet_v1.1", "vgg16", "alexnet", "mobilenet_v1"]
ASYMO_NETS = ["resnet18", "resnet50", "mobilenet_v1", "char_rnn_lstm"]


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def mulayer_figures() -> list[dict]:
    plat = load(Platform, MUL / "exynos7420.json", "platform")
    rows = []
    for stem in track(MULAYER_NETS, "muLayer networks"):
        prof = load(ModelProfile, MUL / f"{stem}.json", "profile")
        t0 = time.perf_counter()
        plan = make_plan(plat, prof, PlanRequest(solver="mulayer"))
        wall_ms = (time.perf_counter() - t0) * 1e3
        by = {c.name: c for c in plan.comparisons}
        singles = {n: c for n, c in by.items() if n.startswith("single-")}
        best_single = min(singles.values(), key=lambda c: c.latency_ms)
        l2p = by["layer-to-processor/quint8"]
        modules = plan.report.details["tables"][1]["rows"] if len(plan.report.details["tables"]) > 1 else []
        layer_rows = plan.report.details["tables"][0]["rows"]
        rows.append({
            "network": prof.name,
            "layers": len(prof.layers),
            "latency_ms": {"mulayer": plan.metrics.latency_ms, "layer_to_processor_quint8": l2p.latency_ms,
                           "layer_to_processor_best": by["layer-to-processor/best"].latency_ms,
                           "best_single_processor": best_single.latency_ms,
                           **{n: c.latency_ms for n, c in singles.items()},
                           "mulayer_f32_only": by["mulayer-f32-only"].latency_ms,
                           "mulayer_no_branch": by.get("mulayer-no-branch", plan.metrics).latency_ms},
            "energy_mj": {"mulayer": plan.metrics.energy_mj, "layer_to_processor_quint8": l2p.energy_mj,
                          "best_single_processor": best_single.energy_mj},
            "best_single_processor": best_single.name,
            "normalised_to_layer_to_processor": {
                "single_processor": best_single.latency_ms / l2p.latency_ms,
                "layer_to_processor": 1.0,
                "mulayer": plan.metrics.latency_ms / l2p.latency_ms,
            },
            "reduction_vs_layer_to_processor_pct": 100 * (1 - plan.metrics.latency_ms / l2p.latency_ms),
            "reduction_vs_best_single_pct": 100 * (1 - plan.metrics.latency_ms / best_single.latency_ms),
            "reduction_vs_layer_to_processor_best_pct": 100 * (1 - plan.metrics.latency_ms / by["layer-to-processor/best"].latency_ms),
            "cooperative_layers": sum(r[2] == "cooperative" for r in layer_rows),
            "branch_parallel_modules": sum(r[2] == "branch-parallel" for r in modules),
            "modules": len(modules),
            "make_plan_ms": wall_ms,
        })
    return rows


def asymo_figures() -> list[dict]:
    cpu = load(AsymoCpu, ASY / "kirin970_cpu.json", "platform")
    rows = []
    for stem in track(ASYMO_NETS, "AsyMo networks"):
        net = load(AsymoNetwork, ASY / f"{stem}.json", "profile")
        row: dict = {"network": net.name, "ops": len(net.ops)}
        for split in ("measured", "balanced"):
            t0 = time.perf_counter()
            fast = make_plan(cpu, net, PlanRequest(solver="asymo", options={"split_by": split}))
            wall = (time.perf_counter() - t0) * 1e3
            by = {c.name: c for c in fast.comparisons}
            row[split] = {
                "big_little_ms": fast.metrics.latency_ms,
                "big_only_ms": by["big@max"].latency_ms,
                "little_only_ms": by["little@max"].latency_ms,
                "speedup_over_big_only": by["big@max"].latency_ms / fast.metrics.latency_ms,
                "speedup_over_little_only": by["little@max"].latency_ms / fast.metrics.latency_ms,
                "make_plan_ms": wall,
            }
        frugal = make_plan(cpu, net, PlanRequest(solver="asymo", objective="energy"))
        fast = make_plan(cpu, net, PlanRequest(solver="asymo"))
        d = frugal.report.details
        row["energy_first"] = {
            "big_mhz": d["setting"]["mhz"]["big"],
            "curve": d["frequency"]["clusters"]["big"]["curve"],
            "network_data_reuse": d["frequency"]["network_data_reuse"],
            "energy_mj": frugal.metrics.energy_mj,
            "latency_ms": frugal.metrics.latency_ms,
            "latency_first_energy_mj": fast.metrics.energy_mj,
            "energy_saving_pct": 100 * (1 - frugal.metrics.energy_mj / fast.metrics.energy_mj),
            "slowdown_pct": 100 * (frugal.metrics.latency_ms / fast.metrics.latency_ms - 1),
        }
        row["cost_model"] = d["cost_model"]
        rows.append(row)
    return rows


def main() -> None:
    mul = mulayer_figures()
    print("muLayer on exynos7420 (generated profiles): latency in ms; Fig. 16 normalised to layer-to-processor (QUInt8)")
    print(f"{'network':<16} {'single':>9} {'L2P q8':>9} {'L2P best':>9} {'muLayer':>9} {'vs L2P':>8} {'vs single':>9} "
          f"{'no-branch':>9} {'f32-only':>9} {'coop':>5} {'br.mod':>7}")
    for r in mul:
        lat = r["latency_ms"]
        print(f"{r['network']:<16} {lat['best_single_processor']:>9.2f} {lat['layer_to_processor_quint8']:>9.2f} "
              f"{lat['layer_to_processor_best']:>9.2f} {lat['mulayer']:>9.2f} {r['reduction_vs_layer_to_processor_pct']:>7.1f}% "
              f"{r['reduction_vs_best_single_pct']:>8.1f}% {lat['mulayer_no_branch']:>9.2f} {lat['mulayer_f32_only']:>9.2f} "
              f"{r['cooperative_layers']:>5} {r['branch_parallel_modules']:>3}/{r['modules']:<3}")
    gm = 100 * (1 - geomean([r["normalised_to_layer_to_processor"]["mulayer"] for r in mul]))
    best = max(r["reduction_vs_layer_to_processor_pct"] for r in mul)
    print(f"muLayer vs layer-to-processor: geometric-mean reduction {gm:.1f}%, up to {best:.1f}% "
          "(paper, high-end SoC: 30.5% and up to 59.9%)")
    en = 100 * (1 - geomean([r["energy_mj"]["mulayer"] / r["energy_mj"]["layer_to_processor_quint8"] for r in mul]))
    print(f"energy vs layer-to-processor: geometric-mean reduction {en:.1f}% (paper: 1.26x efficiency, i.e. about 21%)")

    asy = asymo_figures()
    print("\nAsyMo on kirin970-cpu (generated rows and curves): predicted latency at the highest frequencies")
    print(f"{'network':<16} {'B+L ms':>9} {'big ms':>9} {'little ms':>9} {'B+L/big':>8} {'balanced':>9} "
          f"{'E-first MHz':>11} {'curve':>12} {'E saving':>9} {'slowdown':>9}")
    for r in asy:
        m, b, e = r["measured"], r["balanced"], r["energy_first"]
        print(f"{r['network']:<16} {m['big_little_ms']:>9.2f} {m['big_only_ms']:>9.2f} {m['little_only_ms']:>9.2f} "
              f"{m['speedup_over_big_only']:>7.2f}x {b['speedup_over_big_only']:>8.2f}x {e['big_mhz']:>11g} "
              f"{e['curve']:>12} {e['energy_saving_pct']:>8.1f}% {e['slowdown_pct']:>8.1f}%")
    cm = asy[0]["cost_model"]
    print("cost model fit (270 rows per cluster, 10-fold CV): " + ", ".join(
        f"{c}: R^2 {v['r2_fit']:.3f} (CV {v['r2_cv_10fold']:.3f})" for c, v in cm.items())
        + " (paper: 0.97 big, 0.98 little)")
    out = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "note": "generated profiles (profiles/generate_within_layer.py); predicted by the shared evaluator",
        "mulayer": {"networks": mul, "geomean_reduction_vs_layer_to_processor_pct": gm,
                    "max_reduction_vs_layer_to_processor_pct": best, "geomean_energy_reduction_pct": en},
        "asymo": {"networks": asy},
    }
    path = ROOT / "bench" / "results" / "within_layer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
