"""Small random multi-network instances (platform + profiles as documents) for the
scheduling tests: a 2-core CPU cluster, a GPU and optionally an estimated NPU."""

from __future__ import annotations

import numpy as np

from planner.core.schema import ModelProfile, Platform, ScheduleRequest


def platform(rng: np.random.Generator, *, npu: bool = False, cores: int = 2, gpu_limit: int | None = None) -> Platform:
    def poly():
        return [float(rng.uniform(0.05, 0.6)), float(rng.uniform(0, 2e-7))]

    devices = [
        {"id": "cpu", "kind": "cpu", "cores": cores,
         "active_core_freq_mhz": [2000.0 - 200.0 * k for k in range(cores)],
         "dvfs_levels": [{"freq_mhz": 2000.0 - 200.0 * k, "voltage_v": 1.0 - 0.05 * k} for k in range(cores)]},
        {"id": "gpu", "kind": "gpu", "dvfs_levels": [{"freq_mhz": 600.0}], "memory_limit_bytes": gpu_limit},
    ]
    trans = [{"from_device": "cpu", "to_device": "cpu", "time_coeffs_ms": poly()},
             {"from_device": "cpu", "to_device": "gpu", "time_coeffs_ms": poly()},
             {"from_device": "gpu", "to_device": "cpu", "time_coeffs_ms": poly(),
              "energy_coeffs_mj": [float(rng.uniform(0, 0.2))]}]
    if npu:
        devices.append({"id": "npu", "kind": "npu", "dvfs_levels": [{"freq_mhz": 900.0}],
                        "estimate": {"reference_device": "cpu", "speedup": float(rng.uniform(2, 6)), "power_w": 2.0}})
        trans += [{"from_device": "cpu", "to_device": "npu", "time_coeffs_ms": poly()},
                  {"from_device": "npu", "to_device": "cpu", "time_coeffs_ms": poly()}]
    # GPU <-> NPU transfers are declared free (explicitly: an unlisted pair is an error)
    return Platform.model_validate({"name": "tiny", "devices": devices, "transitions": trans,
                                    "default_transition": {"time_coeffs_ms": [0.0]}})


def profile(rng: np.random.Generator, name: str, n_layers: int, cores: int = 2, dag: bool = True,
            integer_times: bool = False) -> ModelProfile:
    """integer_times: whole-ms times, so that many mappings tie."""
    rnd = (lambda t: float(max(1, round(t)))) if integer_times else (lambda t: round(t, 4))  # noqa: E731
    layers = []
    for i in range(n_layers):
        preds = None
        if dag and i > 0:
            k = int(rng.integers(1, min(2, i) + 1))
            preds = sorted({f"l{j}" for j in rng.choice(i, size=k, replace=False)})
            if f"l{i - 1}" not in preds and rng.random() < 0.6:
                preds = sorted({*preds, f"l{i - 1}"})
        base = float(rng.uniform(0.5, 6.0))
        ms = []
        for c in range(1, cores + 1):
            ms.append({"device": "cpu", "cores": c, "freq_mhz": 2000.0 - 200.0 * (c - 1),
                       "time_ms": rnd(base / (c * rng.uniform(0.7, 1.0)) * 2.0), "power_w": 1.0 * c,
                       "includes_communication": False})
        if rng.random() < 0.9:
            ms.append({"device": "gpu", "time_ms": rnd(base * float(rng.uniform(0.2, 1.5))), "power_w": 3.0,
                       "includes_communication": False})
        layer = {"id": f"l{i}", "op_type": "conv", "input_bytes": 1000, "output_bytes": int(rng.integers(1e5, 3e6)),
                 "memory_bytes": int(rng.integers(1e5, 1e6)), "measurements": ms}
        if preds is not None:
            layer["predecessors"] = preds
        layers.append(layer)
    return ModelProfile.model_validate({"name": name, "layers": layers})


def request(apps, **kw) -> ScheduleRequest:
    return ScheduleRequest.model_validate({"apps": [{"profile": p, "period_ms": t, "priority": r} for p, t, r in apps], **kw})


OPS = ("conv", "dw", "add", "pool", "fc")


def varied_instance(rng: np.random.Generator, *, max_mappings: int = 1_000_000, networks: int = 2,
                    layers: tuple[int, int] = (4, 7), cores: int | None = None, npu: bool | None = None):
    """A small instance of a random cost shape (issue 15), as documents: (platform,
    profiles, request). Varies per op type the GPU/CPU speed ratio (GPU from 5x faster
    to 5x slower), how a layer scales with cores (4 cores may be slower than 1 on small
    layers), transfers from free to dominant and costing energy, an NPU (estimated from
    the CPU, refusing some op types), a GPU refusing an op type, a GPU memory limit, a
    utilisation cap, periods from tight to loose and priorities that are not
    rate-monotonic. `networks` networks of `layers` layers each; sizes are drawn again until every CPU
    configuration's mapping space sums to <= max_mappings, so enumeration stays cheap."""
    fixed_cores, fixed_npu = cores, npu
    for _ in range(10_000):
        cores = int(rng.choice([2, 3, 4])) if fixed_cores is None else fixed_cores
        npu = bool(rng.random() < 0.4) if fixed_npu is None else fixed_npu
        n_layers = [int(rng.integers(layers[0], layers[1] + 1)) for _ in range(networks)]
        parts = None if cores < 4 or fixed_cores else [[2, 2], [1, 1, 1, 1]] if rng.random() < 0.5 else [[4], [2, 1, 1]]
        from models.multiapp import partitions as all_parts

        pes = [len(p) + 1 + npu for p in (parts or all_parts(cores))]
        if sum(p ** sum(n_layers) for p in pes) <= max_mappings:
            break
    else:
        raise ValueError(f"no instance of these sizes has <= {max_mappings} mappings")
    gpu_ratio = {op: float(np.exp(rng.uniform(np.log(0.2), np.log(5.0)))) for op in OPS}
    scaling = {op: float(rng.uniform(-0.4, 1.0)) for op in OPS}  # t(k cores) = t(1) / k^scaling
    gpu_refuses = [str(rng.choice(OPS))] if rng.random() < 0.35 else []
    npu_refuses = [str(o) for o in OPS if rng.random() < 0.3]
    layer_ms = float(np.exp(rng.uniform(np.log(0.3), np.log(5.0))))
    scale = float(rng.choice([0.0, 0.05, 0.5, 2.0, 8.0])) * layer_ms  # transfer ms per MB: free .. dominant

    def poly():
        return [float(rng.uniform(0, 0.3) * scale), float(rng.uniform(0.2, 1.0) * scale / 1e6)]

    def energy():
        return [float(rng.uniform(0, 0.5) * scale), float(rng.uniform(0, 2.0) * scale / 1e6)]

    freqs = [2000.0 - 100.0 * k for k in range(cores)]
    devices = [
        {"id": "cpu", "kind": "cpu", "cores": cores, "active_core_freq_mhz": freqs,
         "dvfs_levels": [{"freq_mhz": f, "voltage_v": 1.0 - 0.02 * k} for k, f in enumerate(freqs)]},
        {"id": "gpu", "kind": "gpu", "dvfs_levels": [{"freq_mhz": 600.0}], "unsupported_ops": gpu_refuses},
    ]
    if npu:
        devices.append({"id": "npu", "kind": "npu", "dvfs_levels": [{"freq_mhz": 900.0}], "unsupported_ops": npu_refuses,
                        "estimate": {"reference_device": "cpu", "reference_cores": 1,
                                     "speedup": float(rng.uniform(0.5, 6.0)), "power_w": float(rng.uniform(0.5, 3.0))}})
    ids = [d["id"] for d in devices]
    trans = [{"from_device": a, "to_device": b, "time_coeffs_ms": poly(), "energy_coeffs_mj": energy()}
             for a in ids for b in ids if a != b or a == "cpu"]
    profiles, mem_total = [], 0
    for a, L in enumerate(n_layers):
        layers = []
        for i in range(L):
            op = str(rng.choice(OPS))
            base = layer_ms * float(rng.uniform(0.3, 2.0))
            ms = [{"device": "cpu", "cores": k, "freq_mhz": freqs[k - 1], "includes_communication": False,
                   "time_ms": round(base / k ** scaling[op], 4), "power_w": round(0.8 * k * float(rng.uniform(0.7, 1.3)), 4)}
                  for k in range(1, cores + 1)]
            ms.append({"device": "gpu", "time_ms": round(base * gpu_ratio[op] * float(rng.uniform(0.8, 1.25)), 4),
                       "power_w": round(float(rng.uniform(1.5, 4.0)), 4), "includes_communication": False})
            mem = int(rng.integers(1e5, 2e6))
            mem_total += mem
            layer = {"id": f"l{i}", "op_type": op, "input_bytes": 1000, "output_bytes": int(rng.integers(5e4, 2e6)),
                     "memory_bytes": mem, "measurements": ms}
            if i > 0:
                preds = {i - 1} if rng.random() < 0.7 else {int(j) for j in rng.choice(i, size=min(i, 2), replace=False)}
                layer["predecessors"] = [f"l{j}" for j in sorted(preds)]
            layers.append(layer)
        profiles.append(ModelProfile.model_validate({"name": f"N{a}", "layers": layers}))
    if rng.random() < 0.4:
        devices[1]["memory_limit_bytes"] = int(mem_total * rng.uniform(0.2, 0.7))
    plat = Platform.model_validate({"name": "varied", "devices": devices, "transitions": trans})
    periods = [sum(max(min(m["time_ms"] for m in lay.model_dump()["measurements"]), 1e-3) for lay in p.layers)
               * float(rng.uniform(1.5, 5.0)) for p in profiles]
    prio = [int(x) for x in rng.permutation(networks)]
    req = request([(p.name, round(t, 3), r) for p, t, r in zip(profiles, periods, prio)],
                  cpu_utilisation_cap=float(rng.choice([0.5, 0.7, 1.0])),
                  interference_window=str(rng.choice(["period", "mobility"])),
                  analysis=str(rng.choice(["executor", "kang"])),  # drawn last: earlier draws keep their values
                  **({"cpu_partitions": {"cpu": parts}} if parts else {}))
    return plat, profiles, req
