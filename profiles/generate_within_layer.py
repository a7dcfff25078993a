"""Deterministic generator of the within-layer planning data (issue 6). Run
`python -m profiles.generate_within_layer` to rewrite:

- profiles/mulayer/exynos7420.json: an Exynos 7420-like CPU+GPU platform (muLayer's
  high-end SoC, section 7.1: 4x Cortex-A57 at 2.1 GHz, Mali-T760 MP8 at 700 MHz);
- profiles/mulayer/{googlenet,squeezenet_v1.1,vgg16,alexnet,mobilenet_v1}.json: the five
  networks of muLayer's Table 1 with their real layer shapes, branch structure
  (Inception and Fire modules as DAGs), multiply-accumulates and tensor sizes, and
  per-layer measurements in F32 (untyped), F16 and QUInt8 on both processors;
- profiles/asymo/kirin970_cpu.json: the Kirin 970 CPU of AsyMo's Table 3 (clusters,
  frequencies, peak MM throughput, caches, memory bandwidth and latency) with measured
  matrix-multiply rows and energy-frequency curves;
- profiles/asymo/{resnet18,resnet50,mobilenet_v1,char_rnn_lstm}.json: AsyMo workloads as
  their matrix multiplies (M, K, N).

From the papers: the processors and frequencies, Table 3's figures, the network
architectures, the data-type trends (section 4.1: QUInt8 helps the CPU, F16 the GPU,
F16 does not help the CPU, QUInt8 is slow on the GPU), the GPU's ~1.4x lead over the
CPU in F32 (section 3.1), 270 cost-model rows from 15 MM and 20 MV sizes (section 5),
the little cluster's flat power curve and the memory latency drop above 1.86 GHz
(Fig. 10). GENERATED here (seeded): every time, power, sample and curve value, from
the simple models below. Not measurements; plans on them illustrate, not reproduce.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 20190325
STORAGE_BYTES = 1  # muLayer stores every tensor and filter as QUInt8 (section 4.2)

# ------------------------------------------------------------------ muLayer: timing model
# exec_ms = overhead + MACs / rate + bytes moved / bandwidth, x lognormal noise.
RATE_GMACS = {("cpu", "f32"): 5.0, ("cpu", "f16"): 4.9, ("cpu", "quint8"): 12.0,
              ("gpu", "f32"): 7.0, ("gpu", "f16"): 11.5, ("gpu", "quint8"): 6.0}
DW_EFFICIENCY = 0.25  # depthwise convolutions use the ALUs poorly
BANDWIDTH_GBPS = {"cpu": 5.0, "gpu": 6.0}
OVERHEAD_MS = {"cpu": 0.03, "gpu": 0.12}  # thread wake-up / kernel launch
BYTES_PER = {"f32": 4, "f16": 2, "quint8": 1}
POWER_W = {("cpu", "f32"): 3.3, ("cpu", "f16"): 3.3, ("cpu", "quint8"): 3.0,
           ("gpu", "f32"): 2.4, ("gpu", "f16"): 2.1, ("gpu", "quint8"): 2.3}
GPU_MAP_ALPHA_MS_PER_BYTE = 1.0e-7  # map/unmap of shared buffers (zero-copy, cache maintenance)
GPU_MAP_BETA_MS = 0.05


class Net:
    """Builds a profile's layers with real shapes: (H, W, C) per layer output."""

    def __init__(self, h: int, w: int, c: int):
        self.shape: dict[str, tuple[int, int, int]] = {"": (h, w, c)}
        self.layers: list[dict] = []
        self.last = ""

    def _add(self, lid, op, srcs, out, macs=None, weights=0):
        srcs = srcs if srcs is not None else [self.last]
        in_elems = sum(math.prod(self.shape[s]) for s in srcs)
        self.shape[lid] = out
        self.layers.append({"id": lid, "op_type": op, "preds": [s for s in srcs if s],
                            "in": in_elems, "out": math.prod(out), "w": weights, "macs": macs})
        self.last = lid
        return lid

    def conv(self, lid, oc, k, s=1, pad=None, src=None, groups=1, op="conv"):
        h, w, c = self.shape[src if src is not None else self.last]
        pad = k // 2 if pad is None else pad
        oh, ow = (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1
        per = k * k * c // groups
        return self._add(lid, op, None if src is None else [src], (oh, ow, oc), oh * ow * oc * per, oc * per + oc)

    def dwconv(self, lid, k, s=1):
        h, w, c = self.shape[self.last]
        oh, ow = (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1
        return self._add(lid, "dwconv", None, (oh, ow, c), oh * ow * c * k * k, c * k * k + c)

    def pool(self, lid, k, s, pad=0, src=None, global_=False):
        h, w, c = self.shape[src if src is not None else self.last]
        if global_:
            oh = ow = 1
        else:  # Caffe's ceil mode
            oh, ow = math.ceil((h + 2 * pad - k) / s) + 1, math.ceil((w + 2 * pad - k) / s) + 1
        return self._add(lid, "pool", None if src is None else [src], (oh, ow, c))

    def lrn(self, lid):
        return self._add(lid, "lrn", None, self.shape[self.last])

    def fc(self, lid, out):
        n_in = math.prod(self.shape[self.last])
        return self._add(lid, "fc", None, (1, 1, out), n_in * out, n_in * out + out)

    def concat(self, lid, srcs):
        h, w, _ = self.shape[srcs[0]]
        return self._add(lid, "concat", srcs, (h, w, sum(self.shape[s][2] for s in srcs)))

    def softmax(self, lid):
        return self._add(lid, "softmax", None, self.shape[self.last])


def googlenet() -> Net:
    n = Net(224, 224, 3)
    n.conv("conv1", 64, 7, 2, 3)
    n.pool("pool1", 3, 2)
    n.lrn("norm1")
    n.conv("conv2_reduce", 64, 1)
    n.conv("conv2", 192, 3)
    n.lrn("norm2")
    n.pool("pool2", 3, 2)
    spec = [("3a", 64, 96, 128, 16, 32, 32), ("3b", 128, 128, 192, 32, 96, 64), "pool3",
            ("4a", 192, 96, 208, 16, 48, 64), ("4b", 160, 112, 224, 24, 64, 64), ("4c", 128, 128, 256, 24, 64, 64),
            ("4d", 112, 144, 288, 32, 64, 64), ("4e", 256, 160, 320, 32, 128, 128), "pool4",
            ("5a", 256, 160, 320, 32, 128, 128), ("5b", 384, 192, 384, 48, 128, 128)]
    for item in spec:
        if isinstance(item, str):
            n.pool(item, 3, 2)
            continue
        name, c1, r3, c3, r5, c5, pp = item
        fork = n.last
        p = f"inception_{name}"
        b0 = n.conv(f"{p}/1x1", c1, 1, src=fork)
        n.conv(f"{p}/3x3_reduce", r3, 1, src=fork)
        b1 = n.conv(f"{p}/3x3", c3, 3)
        n.conv(f"{p}/5x5_reduce", r5, 1, src=fork)
        b2 = n.conv(f"{p}/5x5", c5, 5)
        n.pool(f"{p}/pool", 3, 1, 1, src=fork)
        b3 = n.conv(f"{p}/pool_proj", pp, 1)
        n.concat(f"{p}/output", [b0, b1, b2, b3])
    n.pool("pool5", 7, 1, global_=True)
    n.fc("loss3/classifier", 1000)
    n.softmax("prob")
    return n


def squeezenet11() -> Net:
    n = Net(224, 224, 3)
    n.conv("conv1", 64, 3, 2, 0)
    n.pool("pool1", 3, 2)
    for name, s, e in [("fire2", 16, 64), ("fire3", 16, 64), ("fire4", 32, 128), ("fire5", 32, 128),
                       ("fire6", 48, 192), ("fire7", 48, 192), ("fire8", 64, 256), ("fire9", 64, 256)]:
        n.conv(f"{name}/squeeze1x1", s, 1)
        sq = n.last
        a = n.conv(f"{name}/expand1x1", e, 1, src=sq)
        b = n.conv(f"{name}/expand3x3", e, 3, src=sq)
        n.concat(f"{name}/concat", [a, b])
        if name in ("fire3", "fire5"):
            n.pool(f"pool{name[-1]}", 3, 2)
    n.conv("conv10", 1000, 1)
    n.pool("pool10", 13, 1, global_=True)
    n.softmax("prob")
    return n


def vgg16() -> Net:
    n = Net(224, 224, 3)
    for b, (c, reps) in enumerate([(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)], start=1):
        for r in range(1, reps + 1):
            n.conv(f"conv{b}_{r}", c, 3)
        n.pool(f"pool{b}", 2, 2)
    n.fc("fc6", 4096)
    n.fc("fc7", 4096)
    n.fc("fc8", 1000)
    n.softmax("prob")
    return n


def alexnet() -> Net:
    n = Net(227, 227, 3)
    n.conv("conv1", 96, 11, 4, 0)
    n.lrn("norm1")
    n.pool("pool1", 3, 2)
    n.conv("conv2", 256, 5, groups=2)
    n.lrn("norm2")
    n.pool("pool2", 3, 2)
    n.conv("conv3", 384, 3)
    n.conv("conv4", 384, 3, groups=2)
    n.conv("conv5", 256, 3, groups=2)
    n.pool("pool5", 3, 2)
    n.fc("fc6", 4096)
    n.fc("fc7", 4096)
    n.fc("fc8", 1000)
    n.softmax("prob")
    return n


def mobilenet_v1() -> Net:
    n = Net(224, 224, 3)
    n.conv("conv1", 32, 3, 2)
    cfg = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512)] + [(1, 512)] * 5 + [(2, 1024), (1, 1024)]
    for i, (s, oc) in enumerate(cfg, start=2):
        n.dwconv(f"conv{i}_dw", 3, s)
        n.conv(f"conv{i}_pw", oc, 1)
    n.pool("pool6", 7, 1, global_=True)
    n.fc("fc7", 1000)
    n.softmax("prob")
    return n


MULAYER_NETS = [("googlenet", "GoogLeNet", googlenet), ("squeezenet_v1.1", "SqueezeNet v1.1", squeezenet11),
                ("vgg16", "VGG-16", vgg16), ("alexnet", "AlexNet", alexnet), ("mobilenet_v1", "MobileNet v1", mobilenet_v1)]


def exec_ms(layer: dict, dev: str, dtype: str) -> float:
    size = BYTES_PER[dtype]
    moved = (layer["in"] + layer["out"] + layer["w"]) * size
    t = OVERHEAD_MS[dev] + moved / (BANDWIDTH_GBPS[dev] * 1e6)
    if layer["macs"]:
        rate = RATE_GMACS[(dev, dtype)] * (DW_EFFICIENCY if layer["op_type"] == "dwconv" else 1.0)
        t += layer["macs"] / (rate * 1e6)
    elif layer["op_type"] in ("pool", "lrn"):
        t += layer["in"] * 9 / (RATE_GMACS[(dev, dtype)] * 0.5e6)  # window operations
    return t


def exynos7420() -> dict:
    rng = np.random.default_rng([SEED, 0])
    sizes = [4096, 16384, 65536, 262144, 1048576, 4194304]
    points = [{"bytes": b, "time_ms": round((GPU_MAP_ALPHA_MS_PER_BYTE * b + GPU_MAP_BETA_MS) * float(rng.uniform(0.96, 1.04)), 6)}
              for b in sizes for _ in range(2)]
    return {
        "schema_version": 1,
        "name": "exynos7420",
        "source": "muLayer (Kim et al., EuroSys'19) section 7.1: Exynos 7420 with 4x Cortex-A57 at 2.1 GHz and an "
        "octa-core Mali-T760 at 700 MHz (the little A53 cluster is not used by muLayer's CPU side and is left out). "
        "GENERATED by profiles/generate_within_layer.py (seed %d): static powers and the GPU's map/unmap "
        "micro-benchmark points (zero-copy shared memory), fitted by the planner. Not measurements." % SEED,
        "devices": [
            {"id": "cpu", "kind": "cpu", "symbol": "C", "name": "4x Cortex-A57 @ 2.1 GHz",
             "dvfs_levels": [{"freq_mhz": 2100.0}], "static_power_w": 0.2},
            {"id": "gpu", "kind": "gpu", "symbol": "G", "name": "Mali-T760 MP8 @ 700 MHz",
             "dvfs_levels": [{"freq_mhz": 700.0}], "static_power_w": 0.15,
             "communication": {"kind": "samples", "points": points}},
        ],
        "fallback_order": ["gpu", "cpu"],
    }


def mulayer_profile(k: int, stem: str, title: str, build) -> dict:
    rng = np.random.default_rng([SEED, 1, k])
    net = build()
    layers = []
    for layer in net.layers:
        ms = []
        for dev in ("cpu", "gpu"):
            for dtype in ("f32", "f16", "quint8"):
                t = exec_ms(layer, dev, dtype) * float(rng.lognormal(0.0, 0.08))
                p = POWER_W[(dev, dtype)] * float(rng.uniform(0.96, 1.04)) * (1.0 if layer["macs"] else 0.85)
                m = {"device": dev, "time_ms": round(t, 5), "power_w": round(p, 4), "includes_communication": False}
                if dtype != "f32":
                    m["dtype"] = dtype
                ms.append(m)
        doc = {"id": layer["id"], "op_type": layer["op_type"], "input_bytes": layer["in"] * STORAGE_BYTES,
               "output_bytes": layer["out"] * STORAGE_BYTES, "weight_bytes": layer["w"] * STORAGE_BYTES,
               "predecessors": layer["preds"]}
        if layer["macs"]:
            doc["macs"] = int(layer["macs"])
        doc["measurements"] = ms
        layers.append(doc)
    return {
        "schema_version": 1,
        "name": title,
        "platform": "exynos7420",
        "source": f"{title}: architecture (layer shapes, branches, multiply-accumulates) from its paper; tensors "
        "sized as QUInt8 (muLayer stores every tensor in 8 bits). Per-layer times and powers in F32 (untyped), F16 "
        f"and QUInt8 on the CPU and the GPU are GENERATED by profiles/generate_within_layer.py (seed {SEED}): "
        "overhead + MACs/throughput + bytes/bandwidth with muLayer's data-type trends; execution only "
        "(includes_communication false). Not measurements.",
        "layers": layers,
    }


# ------------------------------------------------------------------ AsyMo
BIG = [(0.7, 682), (0.8, 1018), (0.8, 1210), (0.8, 1364), (0.9, 1498), (0.9, 1652), (0.9, 1863), (1.0, 2093), (1.1, 2362)]
LITTLE = [(0.7, 509), (0.8, 1018), (0.9, 1210), (0.9, 1402), (1.0, 1556), (1.0, 1690), (1.1, 1844)]
# hidden "true" Table 2 parameters the rows are drawn from (the planner must recover them)
TRUE_PARAMS = {"big": {"t_flop_ns": 0.24, "t_data_ns": 14.0, "t_sched_us": 2.0, "t_fram_us": 45.0, "p": 0.45},
               "little": {"t_flop_ns": 0.41, "t_data_ns": 38.0, "t_sched_us": 3.5, "t_fram_us": 70.0, "p": 0.85}}
ROW_NOISE = 0.12
BIG_MEM_LATENCY_NS = [410, 372, 354, 338, 325, 313, 303, 209, 200]  # drop above 1.86 GHz (Fig. 10)
LITTLE_MEM_LATENCY_NS = [262, 241, 232, 226, 221, 213, 200]
MM_SIZES = [(64, 27, 50176), (64, 576, 50176), (128, 576, 12544), (128, 1152, 12544), (256, 1152, 3136),
            (256, 2304, 3136), (512, 2304, 784), (512, 4608, 784), (512, 4608, 196),  # VGG-16 convolutions
            (64, 32, 12544), (128, 64, 3136), (128, 128, 3136), (256, 128, 784), (512, 256, 196), (1024, 512, 49)]  # MobileNets
MV_SIZES = [(m, k, 1) for m in (256, 512, 1024, 2048) for k in (128, 256, 512, 1024, 2048)]


def _true_cost_ms(c: str, m, k, n, mc, nc, kc, thr) -> float:
    from models.asymo import MMCostModel

    tp = TRUE_PARAMS[c]
    return float(MMCostModel(tp["t_flop_ns"], tp["t_data_ns"], tp["t_sched_us"], tp["t_fram_us"], tp["p"]).predict_ms(
        m, k, n, mc, nc, kc, thr))


def _samples(cid: str, l1: int, l2: int, cores: int, rng) -> list[dict]:
    from models.asymo import block_candidates

    rows = []
    for sizes, per in ((MM_SIZES, 10), (MV_SIZES, 6)):
        for m, k, n in sizes:
            cand = block_candidates(m, n, cores, 8, 8)
            pick = np.unique(np.linspace(0, len(cand) - 1, per).round().astype(int))
            for j in range(per):
                mc, nc = (int(x) for x in cand[pick[j % len(pick)]])
                thr = int(rng.choice([2, 3, 4, 4, 4]))
                kc_l2 = (l2 / 4 / thr - mc * nc) / (mc + nc)
                kc = int(max(1, min(k, (l1 / 4 - 64) / 16, kc_l2 if kc_l2 >= 1 else 1)))
                if j % 3 == 2:
                    kc = max(1, kc // 2)
                t = _true_cost_ms(cid, m, k, n, mc, nc, kc, thr) * float(rng.lognormal(0.0, ROW_NOISE))
                rows.append({"m": m, "k": k, "n": n, "mc": mc, "nc": nc, "kc": kc, "threads": thr, "time_ms": round(t, 6)})
    return rows


def kirin970_cpu() -> dict:
    rng = np.random.default_rng([SEED, 2])
    vb, fb = BIG[-1]
    vl, fl = LITTLE[-1]
    big_curve = [{"freq_mhz": float(f), "comp_power_w": round(1.05 + 2.55 * v * v * f / (vb * vb * fb), 4),
                  "mem_power_w": round(1.3 + 0.6 * v * v * f / (vb * vb * fb), 4), "mem_latency_ns": float(lat)}
                 for (v, f), lat in zip(BIG, BIG_MEM_LATENCY_NS)]
    little_curve = [{"freq_mhz": float(f), "comp_power_w": round(0.62 + 0.05 * v * v * f / (vl * vl * fl), 4),
                     "mem_power_w": round(0.58 + 0.04 * v * v * f / (vl * vl * fl), 4), "mem_latency_ns": float(lat)}
                    for (v, f), lat in zip(LITTLE, LITTLE_MEM_LATENCY_NS)]
    return {
        "schema_version": 1,
        "kind": "asymo-cpu",
        "name": "kirin970-cpu",
        "source": "AsyMo (Wang et al., MobiCom'21) Table 3: Kirin 970, 4x Cortex-A73 (0.68-2.36 GHz, 8.8 GFLOPs per core (read as per core: Table 4's ResNet-18 runs 3.47 GFLOPs in 0.12 s), 64 KB "
        "L1, 2 MB L2, 4.6 GB/s) and 4x Cortex-A53 (0.51-1.84 GHz, 5.1 GFLOPs per core, 32 KB L1, 1 MB L2, 0.86 GB/s), 64 B "
        "lines, 200 ns memory latency; DVFS levels of the HiKey 970; little cluster fixed at its highest level "
        "(section 5). GENERATED by profiles/generate_within_layer.py (seed %d): the 270 multiply rows (15 MM sizes "
        "from VGG-16 and MobileNets, 20 MV sizes, Constraint (2) blocks) drawn from Table 2 with hidden parameters "
        "and %.0f%% lognormal noise, and the energy curves (power = static + c V^2 f; memory latency with the drop "
        "above 1.86 GHz of Fig. 10). Not measurements." % (SEED, ROW_NOISE * 100),
        "dtype_bytes": 4,
        "clusters": [
            {"id": "big", "symbol": "B", "name": "4x Cortex-A73", "cores": 4, "freqs_mhz": [float(f) for _, f in BIG],
             "scale_frequency": True, "peak_gflops": 8.8, "l1_bytes": 65536, "l2_bytes": 2 * 1048576,
             "cache_line_bytes": 64, "mem_bandwidth_gbps": 4.6, "mem_latency_ns": 200.0, "mr": 8, "nr": 8,
             "energy_curve": big_curve, "samples": _samples("big", 65536, 2 * 1048576, 4, rng)},
            {"id": "little", "symbol": "L", "name": "4x Cortex-A53", "cores": 4, "freqs_mhz": [float(f) for _, f in LITTLE],
             "scale_frequency": False, "peak_gflops": 5.1, "l1_bytes": 32768, "l2_bytes": 1048576,
             "cache_line_bytes": 64, "mem_bandwidth_gbps": 0.86, "mem_latency_ns": 200.0, "mr": 8, "nr": 8,
             "energy_curve": little_curve, "samples": _samples("little", 32768, 1048576, 4, rng)},
        ],
    }


def _conv(oc, k, ic, hw):
    return (oc, k * k * ic, hw * hw)


def resnet(depth: int) -> list[tuple[str, str, tuple[int, int, int]]]:
    ops = [("conv1", "conv", _conv(64, 7, 3, 112))]
    blocks = {18: [2, 2, 2, 2], 50: [3, 4, 6, 3]}[depth]
    ic, hw = 64, 56
    for stage, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512)), start=2):
        for b in range(n):
            s = 2 if b == 0 and stage > 2 else 1
            out_hw = hw // s
            p = f"res{stage}{chr(97 + b)}"
            if depth == 18:
                ops.append((f"{p}_branch2a", "conv", _conv(width, 3, ic, out_hw)))
                ops.append((f"{p}_branch2b", "conv", _conv(width, 3, width, out_hw)))
                oc = width
            else:
                ops.append((f"{p}_branch2a", "conv", _conv(width, 1, ic, hw if s == 1 else out_hw)))
                ops.append((f"{p}_branch2b", "conv", _conv(width, 3, width, out_hw)))
                ops.append((f"{p}_branch2c", "conv", _conv(4 * width, 1, width, out_hw)))
                oc = 4 * width
            if b == 0 and (s == 2 or ic != oc):
                ops.append((f"{p}_branch1", "conv", _conv(oc, 1, ic, out_hw)))
            ic, hw = oc, out_hw
    ops.append(("fc1000", "fc", (1000, ic, 1)))
    return ops


def mobilenet_mm() -> list[tuple[str, str, tuple[int, int, int]]]:
    ops = [("conv1", "conv", _conv(32, 3, 3, 112))]
    ic, hw = 32, 112
    cfg = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512)] + [(1, 512)] * 5 + [(2, 1024), (1, 1024)]
    for i, (s, oc) in enumerate(cfg, start=2):
        hw //= s
        ops.append((f"conv{i}_pw", "conv", _conv(oc, 1, ic, hw)))
        ic = oc
    ops.append(("fc7", "fc", (1000, 1024, 1)))
    return ops


def char_rnn() -> list[tuple[str, str, tuple[int, int, int]]]:
    """Char-RNN of section 6.1: LSTM, hidden 512, 2 layers, input 65, length 40, batch 1:
    per step one gate MV per layer (4 gates stacked) and the output projection."""
    ops = []
    for t in range(40):
        ops.append((f"t{t:02d}_lstm1", "lstm", (4 * 512, 65 + 512, 1)))
        ops.append((f"t{t:02d}_lstm2", "lstm", (4 * 512, 512 + 512, 1)))
        ops.append((f"t{t:02d}_out", "fc", (65, 512, 1)))
    return ops


ASYMO_NETS = [("resnet18", "ResNet-18", lambda: resnet(18)), ("resnet50", "ResNet-50", lambda: resnet(50)),
              ("mobilenet_v1", "MobileNets V1", mobilenet_mm), ("char_rnn_lstm", "Char-RNN (LSTM)", char_rnn)]


def asymo_network(title: str, ops) -> dict:
    return {
        "schema_version": 1,
        "kind": "asymo-network",
        "name": title,
        "source": f"{title}: the multiplies (M = output channels, K = kernel area x input channels, N = output "
        "positions; FC and LSTM gates are MV with N = 1) derived from the architecture by "
        "profiles/generate_within_layer.py; depthwise convolutions, which are not multiplies, are left out.",
        "ops": [{"id": oid, "op_type": op, "m": m, "k": k, "n": n} for oid, op, (m, k, n) in ops],
    }


def main() -> None:
    (HERE / "mulayer").mkdir(exist_ok=True)
    (HERE / "asymo").mkdir(exist_ok=True)
    out = {HERE / "mulayer" / "exynos7420.json": exynos7420(), HERE / "asymo" / "kirin970_cpu.json": kirin970_cpu()}
    for k, (stem, title, build) in enumerate(MULAYER_NETS):
        out[HERE / "mulayer" / f"{stem}.json"] = mulayer_profile(k, stem, title, build)
    for stem, title, build in ASYMO_NETS:
        out[HERE / "asymo" / f"{stem}.json"] = asymo_network(title, build())
    for path, doc in out.items():
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(path.relative_to(HERE.parent))


if __name__ == "__main__":
    main()
