"""Tiny hand-made documents whose compiled numbers can be worked out by hand."""

from __future__ import annotations

import copy


def platform_dict() -> dict:
    return {
        "name": "tiny",
        "devices": [
            {"id": "cpu", "kind": "cpu", "dvfs_levels": [
                {"freq_mhz": 500, "voltage_v": 0.8}, {"freq_mhz": 1000, "voltage_v": 1.0}],
             "static_power_w": 0.1},
            {"id": "gpu", "kind": "gpu", "dvfs_levels": [
                {"freq_mhz": 200, "voltage_v": 0.6}, {"freq_mhz": 400, "voltage_v": 0.8}, {"freq_mhz": 800, "voltage_v": 1.0}],
             "static_power_w": 0.2,
             "communication": {"kind": "linear", "levels": [{"alpha_ms_per_byte": 0.001, "beta_ms": 0.5}]}},
            {"id": "npu", "kind": "npu", "dvfs_levels": [{"freq_mhz": 960}], "static_power_w": 0.3,
             "memory_limit_bytes": 1000, "unsupported_ops": ["softmax"],
             "communication": {"kind": "linear", "levels": [{"alpha_ms_per_byte": 0.002, "beta_ms": 1.0}]}},
        ],
    }


def profile_dict() -> dict:
    def layer(i, op, mem, cpu_ms, gpu_ms, npu_ms=None):
        ms = [
            {"device": "cpu", "freq_mhz": 500, "time_ms": cpu_ms * 1.8, "power_w": 1.0},
            {"device": "cpu", "freq_mhz": 1000, "time_ms": cpu_ms, "power_w": 2.1},
            # GPU totals include tensor in/out: 0.5 + 0.001 * bytes each way (100 B in, 100 B out)
            {"device": "gpu", "freq_mhz": 200, "time_ms": gpu_ms * 3 + 1.2, "power_w": 1.0},
            {"device": "gpu", "freq_mhz": 800, "time_ms": gpu_ms + 1.2, "power_w": 3.0},
        ]
        if npu_ms is not None:
            ms.append({"device": "npu", "time_ms": npu_ms + 2.4, "energy_mj": (npu_ms + 2.4) * 1.5})
        return {"id": f"l{i}", "op_type": op, "input_bytes": 100, "output_bytes": 100,
                "weight_bytes": mem, "measurements": ms}

    return {
        "name": "tinynet",
        "layers": [
            layer(1, "conv", 400, 10.0, 4.0, 1.0),
            layer(2, "conv", 400, 10.0, 4.0, 1.0),
            layer(3, "conv", 400, 10.0, 4.0, 1.0),
            layer(4, "softmax", 10, 1.0, 2.0, None),
        ],
    }


def with_change(doc: dict, path: str, value) -> dict:
    """Copy of doc with doc[path] = value; path like 'layers.0.measurements.1.time_ms'."""
    out = copy.deepcopy(doc)
    node = out
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node[p]
    last = parts[-1]
    if value is DELETE:
        del node[int(last) if last.isdigit() else last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return out


DELETE = object()
