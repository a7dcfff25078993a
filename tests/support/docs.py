"""Small documents for the service tests, made in code so each test can vary them."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def hikey() -> dict:
    return json.loads((ROOT / "profiles/platforms/hikey970.json").read_text())


def mobilenet() -> dict:
    return json.loads((ROOT / "profiles/models/mobilenet_v2_1.4.json").read_text())


def platform(name: str = "testboard") -> dict:
    return {
        "name": name,
        "source": "tests/support/docs.py (made up)",
        "devices": [
            {"id": "big", "kind": "cpu", "dvfs_levels": [{"freq_mhz": 1000}], "static_power_w": 0.1},
            {"id": "gpu", "kind": "gpu", "dvfs_levels": [{"freq_mhz": 600}], "static_power_w": 0.2,
             "communication": {"kind": "linear", "levels": [{"alpha_ms_per_byte": 1e-6, "beta_ms": 0.2}]}},
            {"id": "npu", "kind": "npu", "dvfs_levels": [{"freq_mhz": 900}], "static_power_w": 0.3,
             "unsupported_ops": ["softmax"],
             "communication": {"kind": "linear", "levels": [{"alpha_ms_per_byte": 2e-6, "beta_ms": 0.4}]}},
        ],
    }


def profile(n_layers: int = 6, name: str = "testnet") -> dict:
    layers = []
    for i in range(n_layers):
        op = "softmax" if i == n_layers - 1 else "conv"
        ms = [
            {"device": "big", "time_ms": 2.0 + (i % 3), "power_w": 2.0, "includes_communication": False},
            {"device": "gpu", "time_ms": 1.0 + 0.5 * (i % 2), "power_w": 3.0, "includes_communication": False},
        ]
        if op != "softmax":
            ms.append({"device": "npu", "time_ms": 0.4 + 0.3 * (i % 4), "power_w": 1.0, "includes_communication": False})
        layers.append({"id": f"l{i}", "op_type": op, "input_bytes": 4000, "output_bytes": 4000, "weight_bytes": 1000,
                       "measurements": ms})
    return {"name": name, "source": "tests/support/docs.py (made up)", "layers": layers}
