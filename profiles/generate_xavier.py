"""Deterministic generator of the shipped NVIDIA Jetson Xavier AGX platform (GPU and the
two DLA cores) and AxoNN's VGG-19 profiles, fused (24 layers) and unfused (43 layers).
Run `python -m profiles.generate_xavier` to rewrite them.

What is from AxoNN (Dagli et al., DAC'22) and what is generated:
- from the paper: the devices it schedules (the Volta GPU and the DLA, sharing DRAM),
  the DLA's engine pipeline of Fig. 2 (convolution core -> SDP activation -> PDP
  pooling), VGG-19's layers, the ranges of section 3.2 (convolutions 3-4.5x faster on
  the GPU and 1.1-1.8x more energy there; pooling 3-7x faster and 0.6-1.15x the
  energy), the whole-network figures of Fig. 1 (all-GPU about 205 mJ; all-DLA about
  139 mJ and 22.6 ms) and the shape of Fig. 3: OUT-transition time grows with the
  tensor, and on the DLA after convolutions it bends upward past its private buffer
  (3 MB costs about 14x what 100 KB does).
- generated here (seeded, reproducible): every per-layer time and energy (from the
  layers' FLOPs and bytes, the ratios drawn inside the ranges above, then the totals
  scaled to Fig. 1 and the ratios clipped back into their ranges, so all-GPU is 205
  mJ and all-DLA close to 139 mJ and 22.6 ms; the all-GPU time, 7 ms, is our choice),
  the transition-cost sample points (the curves of Fig. 3's shape plus 4%
  noise), their energies, and the pipeline savings. The CPU is left out: AxoNN gives
  no CPU numbers. The second DLA core repeats the first one's numbers. Plans computed
  on these files are illustrations, not reproductions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 20220710
MB = 1_000_000
FP16 = 2  # bytes per element: TensorRT runs the DLA in fp16

GPU_MHZ = 1377.0
DLA_MHZ = 1395.2
DLAS = ("dla0", "dla1")
GPU_TOTAL_MS = 7.0  # all-GPU fused VGG-19 (generated; Fig. 1 gives energies and the DLA time)
GPU_TOTAL_MJ = 205.0  # Fig. 1
DLA_TOTAL_MS = 22.6  # Fig. 1
DLA_TOTAL_MJ = 139.0  # Fig. 1
# section 3.2: (DLA/GPU time, GPU/DLA energy) ranges by op; FC runs on the convolution core
RATIO = {"conv": ((3.0, 4.5), (1.1, 1.8)), "fc": ((3.0, 4.5), (1.1, 1.8)), "pool": ((3.0, 7.0), (0.6, 1.15))}
DLA_UNITS = {"conv": "conv_core", "fc": "conv_core", "relu": "sdp", "pool": "pdp"}
DLA_STREAM_GBPS = 60.0  # what a layer would read back from DRAM if not streamed (pipeline saving)
DLA_POWER_W = 6.0  # 139 mJ / 22.6 ms (Fig. 1)

# Transition-cost curves (x in MB): Fig. 3's shapes. "knee" = slope change at 1 MB.
CURVES = {
    ("gpu", "out", ("conv",)): lambda x: 0.015 + 0.055 * x + 0.0035 * x * x,
    ("gpu", "out", ("pool",)): lambda x: 0.012 + 0.045 * x,
    ("gpu", "out", None): lambda x: 0.012 + 0.05 * x,
    ("gpu", "in", None): lambda x: 0.008 + 0.03 * x,
    ("dla", "out", ("conv",)): lambda x: 0.03 + 0.08 * x + 0.21 * np.maximum(x - 1.0, 0.0),
    ("dla", "out", ("pool",)): lambda x: 0.02 + 0.06 * x,
    ("dla", "out", None): lambda x: 0.025 + 0.07 * x + 0.12 * np.maximum(x - 1.0, 0.0),
    ("dla", "in", None): lambda x: 0.02 + 0.05 * x + 0.06 * np.maximum(x - 1.0, 0.0),
}
TRANSITION_POWER_W = {"gpu": 18.0, "dla": 5.0}


def _vgg19() -> list[dict]:
    """VGG-19 at 224x224: 16 conv, 5 max-pool, 3 fully connected (the 24 fused layers)."""
    layers = []
    h, c = 224, 3
    blocks = [(64, 2), (128, 2), (256, 4), (512, 4), (512, 4)]
    for b, (cout, n) in enumerate(blocks, start=1):
        for j in range(1, n + 1):
            layers.append({"name": f"conv{b}_{j}", "op": "conv", "h": h, "cin": c, "cout": cout,
                           "flops": 2 * h * h * cout * c * 9, "weights": cout * c * 9 + cout})
            c = cout
        h //= 2
        layers.append({"name": f"pool{b}", "op": "pool", "h": h, "cin": c, "cout": c, "flops": h * h * c * 4, "weights": 0})
    fin = 7 * 7 * 512
    for name, n_in, n_out in (("fc6", fin, 4096), ("fc7", 4096, 4096), ("fc8", 4096, 1000)):
        layers.append({"name": name, "op": "fc", "h": 1, "cin": n_in, "cout": n_out, "flops": 2 * n_in * n_out,
                       "weights": n_in * n_out + n_out})
    assert len(layers) == 24
    return layers


def _bytes(layer: dict, which: str) -> int:
    if which == "out":
        return layer["h"] * layer["h"] * layer["cout"] * FP16
    hin = layer["h"] * 2 if layer["op"] == "pool" else layer["h"]
    if layer["op"] == "fc":
        return layer["cin"] * FP16
    return hin * hin * layer["cin"] * FP16


def _base(rng) -> list[dict]:
    """Per fused layer: GPU and DLA time/energy, drawn in the paper's ranges."""
    arch = _vgg19()
    for L in arch:
        L["in_b"], L["out_b"] = _bytes(L, "in"), _bytes(L, "out")
        L["w_b"] = L["weights"] * FP16
        moved = L["in_b"] + L["out_b"] + L["w_b"]
        L["gpu_ms"] = L["flops"] / 5.5e12 * 1e3 + moved / 110e9 * 1e3 + 0.02
        L["gpu_w"] = float(rng.uniform(26.0, 33.0))
    scale = GPU_TOTAL_MS / sum(L["gpu_ms"] for L in arch)
    for L in arch:
        L["gpu_ms"] *= scale
    escale = GPU_TOTAL_MJ / sum(L["gpu_ms"] * L["gpu_w"] for L in arch)
    for L in arch:
        L["gpu_mj"] = L["gpu_ms"] * L["gpu_w"] * escale
        if L["op"] == "pool":
            L["dla_ms"] = L["gpu_ms"] * float(rng.uniform(3.0, 7.0))
            L["dla_mj"] = L["gpu_mj"] / float(rng.uniform(0.6, 1.15))
        else:
            L["dla_ms"] = L["gpu_ms"] * float(rng.uniform(3.0, 4.5))
            L["dla_mj"] = L["gpu_mj"] / float(rng.uniform(1.1, 1.8))
    # calibrate the all-DLA totals to Fig. 1, then keep every ratio inside section 3.2's range
    ts = DLA_TOTAL_MS / sum(L["dla_ms"] for L in arch)
    es = DLA_TOTAL_MJ / sum(L["dla_mj"] for L in arch)
    for L in arch:
        (tlo, thi), (elo, ehi) = RATIO[L["op"]]
        L["dla_ms"] = L["gpu_ms"] * min(max(L["dla_ms"] * ts / L["gpu_ms"], tlo), thi)
        L["dla_mj"] = L["gpu_mj"] / min(max(L["gpu_mj"] / (L["dla_mj"] * es), elo), ehi)
    return arch


def _m(device: str, ms: float, mj: float, freq: float) -> dict:
    return {"device": device, "freq_mhz": freq, "time_ms": round(ms, 6), "energy_mj": round(mj, 6)}


def _measure(gpu_ms, gpu_mj, dla_ms, dla_mj) -> list[dict]:
    out = [_m("gpu", gpu_ms, gpu_mj, GPU_MHZ)]
    out += [_m(d, dla_ms, dla_mj, DLA_MHZ) for d in DLAS]
    return out


def _saving(in_bytes: int, share: float) -> list[dict]:
    """gamma of eq. 2 on each DLA: reading the input back from DRAM instead of the bus."""
    ms = in_bytes / (DLA_STREAM_GBPS * 1e9) * 1e3 * share
    return [{"device": d, "pipeline_saving_ms": round(ms, 6), "pipeline_saving_mj": round(ms * DLA_POWER_W, 6)} for d in DLAS]


def _layer(i: int, name: str, op: str, in_b: int, out_b: int, w_b: int, ms: list[dict], tc: list[dict] | None = None) -> dict:
    doc = {"id": f"{i + 1:02d}_{name}", "op_type": op, "input_bytes": int(in_b), "output_bytes": int(out_b),
           "weight_bytes": int(w_b), "measurements": ms}
    if tc:
        doc["transition_costs"] = tc
    return doc


def fused_doc(rng) -> dict:
    arch = _base(rng)
    layers = []
    prev_op = None
    for i, L in enumerate(arch):
        tc = _saving(L["in_b"], 0.5) if L["op"] == "pool" and prev_op == "conv" else None
        layers.append(_layer(i, L["name"], L["op"], L["in_b"], L["out_b"], L["w_b"],
                             _measure(L["gpu_ms"], L["gpu_mj"], L["dla_ms"], L["dla_mj"]), tc))
        prev_op = L["op"]
    return {
        "schema_version": 1,
        "name": "VGG-19 (fused)",
        "platform": "xavier_agx",
        "source": f"AxoNN (DAC'22) VGG-19 on Xavier AGX, TensorRT-fused: 16 conv(+ReLU), 5 pool, 3 FC. Every number is "
        f"GENERATED by profiles/generate_xavier.py (seed {SEED}) inside the paper's ranges (section 3.2) and scaled to "
        "Fig. 1's all-GPU energy; not measured.",
        "layers": layers,
    }


def unfused_doc(rng) -> dict:
    """43 layers: each ReLU its own layer (16 after convs, 2 after fc6/fc7) and a softmax.
    A DLA ReLU is profiled streamed from the convolution core (nearly free); read back
    from DRAM it would cost its pipeline saving."""
    arch = _base(rng)
    layers: list[dict] = []

    def add(name, op, in_b, out_b, w_b, ms, tc=None):
        layers.append(_layer(len(layers), name, op, in_b, out_b, w_b, ms, tc))

    for L in arch:
        if L["op"] in ("conv", "fc"):
            share = float(rng.uniform(0.86, 0.93))  # the activation's part of the fused time
            add(L["name"], L["op"], L["in_b"], L["out_b"], L["w_b"],
                _measure(L["gpu_ms"] * share, L["gpu_mj"] * share, L["dla_ms"] * share, L["dla_mj"] * share))
            if L["name"] == "fc8":
                continue
            relu_gpu_ms = 2 * L["out_b"] / 110e9 * 1e3 + 0.012  # a separate kernel: read + write
            relu_dla_ms = L["dla_ms"] * (1 - share) * 0.5
            add(f"relu_{L['name']}", "relu", L["out_b"], L["out_b"], 0,
                _measure(relu_gpu_ms, relu_gpu_ms * 24.0, relu_dla_ms, relu_dla_ms * DLA_POWER_W),
                _saving(L["out_b"], 1.0))
        else:
            prev_relu = layers[-1]["op_type"] == "relu"
            add(L["name"], "pool", L["in_b"], L["out_b"], 0,
                _measure(L["gpu_ms"], L["gpu_mj"], L["dla_ms"], L["dla_mj"]), _saving(L["in_b"], 0.5) if prev_relu else None)
    sm_ms = float(rng.uniform(0.015, 0.025))
    add("softmax", "softmax", 1000 * FP16, 1000 * FP16, 0, _measure(sm_ms, sm_ms * 22.0, sm_ms * 3.5, sm_ms * 3.5 * DLA_POWER_W))
    assert len(layers) == 43, len(layers)
    return {
        "schema_version": 1,
        "name": "VGG-19 (unfused)",
        "platform": "xavier_agx",
        "source": f"AxoNN (DAC'22) VGG-19 on Xavier AGX, layer by layer: 16 conv, 18 ReLU, 5 pool, 3 FC, softmax. "
        f"Every number is GENERATED by profiles/generate_xavier.py (seed {SEED}) inside the paper's ranges "
        "(section 3.2); ReLU and pooling carry DLA pipeline savings (eq. 2); not measured.",
        "layers": layers,
    }


def _points(rng, fn, power_w: float) -> list[dict]:
    sizes = np.unique(np.round(np.geomspace(1_000, 13 * MB, 28)).astype(np.int64))
    out = []
    for b in sizes:
        t = float(fn(b / MB)) * float(rng.lognormal(0, 0.04))
        e = t * power_w * float(rng.lognormal(0, 0.04))
        out.append({"bytes": int(b), "time_ms": round(t, 6), "energy_mj": round(e, 6)})
    return out


def platform_doc(rng) -> dict:
    curves = []
    for (kind, direction, ops), fn in CURVES.items():
        devices = ["gpu"] if kind == "gpu" else list(DLAS)
        pts = _points(rng, fn, TRANSITION_POWER_W[kind])
        for d in devices:
            cv = {"device": d, "direction": direction, "points": pts}
            if ops is not None:
                cv["op_types"] = list(ops)
            curves.append(cv)
    dla = lambda i: {  # noqa: E731
        "id": DLAS[i], "kind": "dla", "symbol": "DE"[i], "name": f"NVDLA core {i}",
        "dvfs_levels": [{"freq_mhz": DLA_MHZ}], "pipeline_units": DLA_UNITS,
    }
    return {
        "schema_version": 1,
        "name": "xavier_agx",
        "source": "NVIDIA Jetson Xavier AGX as AxoNN (DAC'22) uses it: the Volta GPU and the two DLA cores on shared "
        "DRAM, at their MAXN clocks; the DLA's engine pipeline of Fig. 2. Transition-cost points are GENERATED by "
        f"profiles/generate_xavier.py (seed {SEED}) in the shape of Fig. 3 (time) with 4% noise; energies = time x "
        "a generated transition power. The 8-core Carmel CPU is left out: AxoNN gives no CPU numbers.",
        "devices": [
            {"id": "gpu", "kind": "gpu", "symbol": "G", "name": "512-core Volta GPU", "dvfs_levels": [{"freq_mhz": GPU_MHZ}]},
            dla(0),
            dla(1),
        ],
        "fallback_order": ["dla0", "gpu"],
        "transition_costs": curves,
    }


def main() -> None:
    (HERE / "platforms" / "xavier_agx.json").write_text(json.dumps(platform_doc(np.random.default_rng([SEED, 0])), indent=1) + "\n")
    (HERE / "models" / "vgg19_fused.json").write_text(json.dumps(fused_doc(np.random.default_rng([SEED, 1])), indent=1) + "\n")
    (HERE / "models" / "vgg19_unfused.json").write_text(json.dumps(unfused_doc(np.random.default_rng([SEED, 1])), indent=1) + "\n")
    print("xavier_agx.json, vgg19_fused.json (24 layers), vgg19_unfused.json (43 layers)")


if __name__ == "__main__":
    main()
