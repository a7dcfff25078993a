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
