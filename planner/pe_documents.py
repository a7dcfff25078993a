"""Kang-style platform and profile documents from a PE profile (executor.pe_profile):
a CPU cluster with `cores`, each layer measured with `cores` = k, other devices as they
are, and device-pair transitions fitted to the measured PE-to-PE handoff. Time only:
no power source here, so the measurements carry no power and the schedule reports no
energy (never invented)."""

from __future__ import annotations

import os
import platform as _platform

import numpy as np

from executor.pipeline import FOREIGN_CPU_MS, HOST_SAMPLE_S, REGIME_COUPLING_FACTOR, REGIME_SLOW_FACTOR
from models.communication import PolynomialCommModel
from planner.core.multiapp import corun_slowdown


def _cpu_mhz() -> float:
    """The CPU's nominal clock (cpufreq's maximum, else /proc/cpuinfo); 1000 if neither says."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            return int(f.read().strip()) / 1000.0
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("cpu mhz"):
                    return round(float(line.split(":")[1]), 1)
    except (OSError, ValueError):
        pass
    return 1000.0


def _charged(r: dict) -> str:
    """What a regime's factor multiplies: the profiled time charged its co-run and coupling
    slowdown (ExecutorRegime.charged_max), where recorded."""
    return f" x the profiled time's charge (at most x{r['charged_max']:.3f})" if r.get("charged_max") else ""


def _named(r: dict) -> str:
    """The periodic runs left out of a regime's figures, which a schedule's run names (the host's
    slices: ExecutorRegime.segment_runs_named), where read."""
    n = r.get("segment_runs_named")
    return "" if n is None else f", {n} more left out for the host's slices (a run names their frames)"


def _or_na(x: float | None, unit: str) -> str:
    return "n/a" if x is None else f"{x:.3g}{unit}"


def fit_handoff(points: list[tuple[int, float]]) -> tuple[list[float], float]:
    """Linear c0 + c1*bytes through the per-size costs (no negative terms); (coeffs, MAPE %)."""
    sizes = np.array([b for b, _ in points], dtype=float)
    ms = np.array([t for _, t in points], dtype=float)
    model = PolynomialCommModel.fit(sizes, ms, degree=1) if np.unique(sizes).size > 1 else PolynomialCommModel((float(ms.mean()),))
    c = [max(0.0, x) for x in model.coeffs_ms]
    pred = np.polynomial.polynomial.polyval(sizes, c)
    mape = float(np.mean(np.abs(pred - ms) / np.maximum(ms, 1e-3)) * 100.0)
    return c, mape


def _host_lines(r: dict) -> list[str]:
    """The host's stalls and the cores' speed through the profile (the stall probe), as
    `profile` prints them."""
    lines: list[str] = []
    if r.get("host_stall_ms") is not None:
        lines.append(f"host stalls (a sleeping real-time probe on each core, {r['host_stall_probe_s']:.0f} s of the "
                     "profiling: paused while the layers and the pipelined cases were timed, which it would slow): "
                     f"the longest {r['host_stall_measured_ms']:.3f} ms, read at the exceedance "
                     f"{r['host_stall_ms']:.3f} ms"
                     + (f" (while the periodic cases ran, up to {r['host_stall_regime_ms']:.3f} ms)"
                        if r.get("host_stall_regime_ms") is not None else "")
                     + "; a schedule's bound charges as a floor under e, the release jitter and the delay curve the "
                     "largest its profiles' periodic cases met where they ran real-time (else this, at its load), and a "
                     "run's frame whose window meets a longer one is named and not held to it")
        if r.get("host_stall_by_busy"):
            lines.append("  by the core's load (windows busy under that share: the stall read there, the probe's "
                         "seconds in that step): " + ", ".join(
                             f"{b['busy_below']:.0%} {b['stall_ms']:.2f} ms ({b['seconds']:.0f} s)"
                             for b in r["host_stall_by_busy"])
                         + "; a schedule is charged the figure at the load its networks can keep a core busy")
    if r.get("foreign_cpu_ms") is not None:
        lines.append(f"other Python threads of the profiling process: at most {r['foreign_cpu_ms']:.2f} ms of CPU in one "
                     "periodic case (its own sampler parked then); they hold the interpreter lock a schedule's threads "
                     f"need, so a run whose process's other threads take over {FOREIGN_CPU_MS:g} ms is outside its bounds")
        if r["foreign_cpu_ms"] > FOREIGN_CPU_MS:
            lines.append("  WARNING: the periodic cases ran beside other Python threads of this process: their figures "
                         "carry the waits for the interpreter lock; profile in a process of its own")
    if r.get("host_slowest_us") is not None:
        lines.append(f"core speed (the stall probe's fixed loop every 5 ms, paused or not; the median of each 0.5 s "
                     f"window, higher: slower): usually {r['host_speed_us']:.2f} us, the slowest window "
                     f"{r['host_slowest_us']:.2f} us (x{r['host_slowest_us'] / max(r['host_speed_us'], 1e-9):.2f})"
                     + (f", {r['host_layer_speed_us']:.2f} us while the layers were timed" if
                        r.get("host_layer_speed_us") is not None else "")
                     + (f", at most {r['host_regime_slowest_us']:.2f} us while the periodic cases ran (what a run is "
                        "checked against)" if r.get("host_regime_slowest_us") is not None else "")
                     + f"; a run whose cores ran slower than x{REGIME_SLOW_FACTOR:g} a schedule's profiles' slowest is "
                     "outside its bounds, and a frame in whose window one loop timing did is named and not held to them")
        if (r.get("host_layer_speed_us") or 0) > REGIME_SLOW_FACTOR * r["host_speed_us"]:
            lines.append(f"  WARNING: the layers were timed while the host ran a core slow (x"
                         f"{r['host_layer_speed_us'] / r['host_speed_us']:.2f} the usual loop time): every prediction "
                         "made from them is slow by what that phase cost; re-profile")
    if r.get("host_coupling_slowest_us") is not None:
        lines.append(f"cores' coupling (the probes' fixed loop run on the first core and each other at once every "
                     f"50 ms, the slower of the two, the faster of two in a row, the median of each 0.5 s window; higher: slower together): usually "
                     f"{r['host_coupling_us']:.1f} us, the slowest window that both the co-run and the "
                     f"coupling probe met (what their charges stand on) {r['host_coupling_slowest_us']:.1f} us"
                     + (f", {r['host_layer_coupling_us']:.1f} us while the multi-core layers were timed"
                        if r.get("host_layer_coupling_us") is not None else "")
                     + f"; a run of a schedule whose PEs use two cores or more, with its cores "
                     f"slower together than x{REGIME_COUPLING_FACTOR:g} a schedule's profiles' slowest, is outside its bounds")
        if (r.get("host_layer_coupling_us") or 0) > REGIME_COUPLING_FACTOR * (r.get("host_coupling_us") or float("inf")):
            lines.append(f"  WARNING: the multi-core layers were timed while the cores' coupling was slow (x"
                         f"{r['host_layer_coupling_us'] / r['host_coupling_us']:.2f} the usual loop run together): every "
                         "prediction for a multi-core PE is made from times of that state; re-profile")
    return lines


def schedule_documents(lm, prof, *, name: str, platform_name: str, model_path: str) -> tuple[dict, dict, list[str]]:
    """(platform, profile, summary lines)."""
    cluster = prof.cluster
    n = len(prof.cores)
    mhz = _cpu_mhz()
    devices = [{
        "id": cluster.id, "kind": "cpu", "name": f"{n} core(s) {sorted(prof.cores)} via {cluster.provider}",
        "cores": n, "dvfs_levels": [{"freq_mhz": mhz}],
    }]
    for o in prof.others:
        kind = "gpu" if any(k in o.provider for k in ("CUDA", "ROCM", "DirectML", "OpenVINO", "CoreML")) else \
            "npu" if any(k in o.provider for k in ("Tensorrt", "QNN", "NNAPI", "Vitis")) else "cpu"
        devices.append({"id": o.id, "kind": kind if kind != "cpu" else "other", "name": o.spec or o.provider,
                        "dvfs_levels": [{"freq_mhz": mhz}]})
    lines = [f"PE profile: {len(lm.layers)} layers; {cluster.id}: {n} core(s) {list(prof.cores)}, "
             f"k = 1..{n} threads pinned; {len(prof.others)} other device(s)"]
    if getattr(prof, "topology", None) is not None:
        lines += [f"topology: {t}" for t in prof.topology.lines()]
    for e in getattr(prof, "corun", None) or []:
        lines.append(f"co-run: PE on cores {','.join(map(str, e['pe_cores']))} with cores "
                     f"{','.join(map(str, e['busy_cores']))} busy: x{e['slowdown']:.3f}, paired blocks ({e['alone_ms']:.3f} -> "
                     f"{e['with_ms']:.3f} ms median of all, x{e['slowdown_p90']:.3f} at p90), x{corun_slowdown(e):.3f} charged (the slower)"
                     + (f"; they share {', '.join(e['shares'])}" if e.get("shares") else "; they share nothing /sys lists")
                     + ("  [SMT SIBLINGS: one physical core]" if "physical core" in e.get("shares", []) else ""))
    for e in getattr(prof, "coupling", None) or []:
        lines.append(f"coupling: PE on cores {','.join(map(str, e['pe_cores']))}: {e['blocks']} blocks, median "
                     f"{e['block_median_ms']:.3f} ms, slowest {e['block_max_ms']:.3f} ms"
                     + (f" (two in a row {e['state_max_ms']:.3f} ms)" if e.get("state_max_ms") is not None else "")
                     + f", slow state {e['slow_ms']:.3f} ms against "
                     f"{e['profiled_ms']:.3f} profiled: x{e['slowdown']:.3f} charged; against its first core alone ({e['one_core_ms']:.3f} ms) "
                     f"{e['ratio_p5']:.2f}-{e['ratio_p95']:.2f} (p5-p95; 1 = the cores gained nothing)")
    transitions = []
    for (src, dst), pts in sorted(prof.handoff.items()):
        coeffs, mape = fit_handoff(pts)
        transitions.append({"from_device": src, "to_device": dst, "time_coeffs_ms": coeffs})
        lines.append(f"handoff {src} -> {dst}: {coeffs[0]:.4f} ms + {coeffs[1] if len(coeffs) > 1 else 0:.3e} ms/byte "
                     f"(fit MAPE {mape:.1f}% over {len(pts)} sizes)")
    layers_out = []
    for i, layer in enumerate(lm.layers):
        ms = []
        for k, d in enumerate(prof.k_devices, start=1):
            ms.append({"device": cluster.id, "cores": k, "freq_mhz": mhz, "time_ms": max(prof.layer_ms[d.id][i], 1e-6),
                       "time_spread_ms": prof.layer_spread_ms[d.id][i], "runs": prof.run.runs})
        for o in prof.others:
            ms.append({"device": o.id, "time_ms": max(prof.layer_ms[o.id][i], 1e-6),
                       "time_spread_ms": prof.layer_spread_ms[o.id][i], "runs": prof.run.runs})
        layers_out.append({
            "id": layer.id, "op_type": layer.op_type, "input_bytes": int(layer.input_bytes),
            "output_bytes": int(layer.output_bytes), "weight_bytes": int(layer.weight_bytes),
            "predecessors": [lm.layers[p].id for p in layer.predecessors], "measurements": ms,
        })
    for d in prof.k_devices + prof.others:
        whole = prof.run.times[d.id].whole_ms
        lines.append(f"{d.id}: whole model {np.median(whole):.3f} ms, per-session cost beta {prof.beta_ms[d.id]:.4f} ms")
    source = (f"measured here with ONNX Runtime ({os.path.basename(model_path)}, {_platform.machine()}): per-layer median "
              f"of {prof.run.runs} runs minus the per-session cost; PE handoff measured by executor.pipeline")
    platform = {"name": platform_name, "source": source, "devices": devices, "transitions": transitions}
    profile = {"name": name, "platform": platform_name, "source": source,
               "energy_source": "none: no power sensor on this machine (time-only measurements)", "layers": layers_out}
    if prof.regime is not None:
        profile["executor_regime"] = prof.regime
        r = prof.regime
        lines.append(f"executor regime ({r['segment_runs']} periodic segment runs{_named(r)}, PEs at once): segment time <= "
                     f"x{r['interference_factor']:.3f}{_charged(r)} + {r['segment_excess_ms']:.3f} ms, median "
                     f"x{r['interference_factor_p50']:.3f} of profiled (pipelined); dispatch wait {r['dispatch_ms']:.3f} ms "
                     f"worst, {r['dispatch_p50_ms']:.3f} median; release jitter {r['release_jitter_ms']:.3f} ms"
                     + (f"; other processes took {r['host_other_cpu_pct']:.1f}% of the CPUs' time meanwhile"
                        if r.get("host_other_cpu_pct") is not None else ""))
        if r.get("exceedance_per_run"):
            lines.append(f"  e read at an exceedance of {r['exceedance_per_run']:g} per segment run: the largest measured "
                         f"{r['segment_excess_measured_ms']:.3f} ms, an exponential tail fitted to the largest runs "
                         + (f"(scale {r['excess_tail_scale_ms']:.3f} ms) " if r.get("excess_tail_scale_ms") is not None
                            else "(too few runs to fit one: the largest measured) ")
                         + "beyond it; every delay curve raised by what the tail added")
        for k, b in sorted((r.get("by_cores") or {}).items()):
            lines.append(f"  on {k}-core PEs ({b['segment_runs']} segment runs{_named(b)}; a schedule of {k}-core PEs is charged these): "
                         f"segment time <= x{b['interference_factor']:.3f}{_charged(b)} + {b['segment_excess_ms']:.3f} ms, dispatch "
                         f"wait {b['dispatch_ms']:.3f} ms worst, release jitter {b['release_jitter_ms']:.3f} ms")
        lines += _host_lines(r)
        if r.get("host_sampled_s"):
            lines.append(f"host background over the {r['host_sampled_s']:g} s of profiling (90th percentile of "
                         f"{HOST_SAMPLE_S:g} s intervals, what a later run is compared with): steal "
                         f"{_or_na(r.get('host_steal_pct'), '%')}, other processes {_or_na(r.get('host_other_cpu_pct'), '%')}, "
                         f"interrupts {_or_na(r.get('host_interrupts_per_s'), '/s')}")
        at_f = next((c["points"] for c in r.get("excess_curves", []) if c["factor"] == r["interference_factor"]), None)
        if at_f:
            lines.append("delay (dispatch waits + excess) of all the runs starting in one window, at most: " + ", ".join(
                f"{e:.3f} ms in {w:g} ms" for w, e in at_f if w in (at_f[0][0], 10.0, 100.0, at_f[-1][0])))
    return platform, profile, lines
