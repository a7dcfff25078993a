"""A deployment bundle: a plan cut on the host into one ONNX file per slice, with a
manifest (slice order, tensor names, each slice's runtime settings, the plan id and its
predicted times, the sha256 and size of every file), so that a board needs no slicer,
no onnx package and no planner to run it: the native agent (native/) and the Python
executor (`BundleRunner`) run the same files with the same settings.

    manifest = make_bundle(plan_doc, onnx_bytes, ["cpu1=openvino:CPU,threads=1,affinity=0"], out_dir)
    runner = BundleRunner(out_dir)           # verifies every file's size and sha256 first
    outputs, slice_ms = runner.run_timed(inputs)

The manifest is JSON (`manifest.json`); its own sha256 is the bundle's id (the service's
ETag). Every slice carries its OpenVINO compile properties as the Python runtime
(executor.runtimes.openvino) computes them, so both executors compile alike.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import onnx

from executor.runtime import RuntimeDevice, build_session, parse_devices, pinned, quantize, clock_ns
from executor.sessions import capture, run_slices, slice_policy
from executor.slicing import LayeredModel, SlicingError, boundary, layers, load_model, materialise, random_inputs, split_model

FORMAT = "hetero-planner-bundle/1"
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1024 * 1024


class BundleError(ValueError):
    """A bundle that cannot be made or must not be run; the message names the field or file."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tensor(lm: LayeredModel, name: str) -> dict:
    dtype = onnx.helper.tensor_dtype_to_np_dtype(lm.dtypes.get(name, onnx.TensorProto.FLOAT))
    shape = lm.shapes.get(name)
    return {"name": name, "dtype": np.dtype(dtype).name, "shape": list(shape) if shape is not None else None}


def _runtime_settings(device: RuntimeDevice) -> dict:
    """What a board needs to compile a slice for `device`: the OpenVINO target and the
    properties the Python runtime compiles with (one source: its `config`)."""
    settings = {"runtime": device.runtime, "target": device.provider, "threads": device.threads,
                "affinity": list(device.affinity) if device.affinity is not None else None,
                "precision": device.precision, "spec": device.spec}
    if device.runtime == "openvino":
        from executor.runtimes.openvino import RUNTIME

        settings["properties"] = {k: str(v) for k, v in RUNTIME.config(device).items()}
    return settings


def make_bundle(plan: Mapping, model, device_specs: Sequence[str], out_dir: str | os.PathLike,
                weights: str = "computed", seed: int = 0) -> dict:
    """Write the bundle of `plan` (a Plan document, or a PlanResource with `plan` and
    `id`) for `model` (path, bytes or ModelProto) under out_dir; returns the manifest.
    Every device the plan uses needs a spec; int8 slices are quantised here on
    calibration feeds of the unsplit model, as SlicedModel does."""
    doc = plan.get("plan", plan)
    # a plan document made here (planner solve --json) has no id: its content names it
    plan_id = plan.get("id") or plan.get("plan_id") or f"local-{sha256_hex(json.dumps(doc, sort_keys=True).encode())[:16]}"
    if not doc.get("slices"):
        raise BundleError("plan.slices: the plan has no slices")
    if isinstance(model, (bytes, bytearray)):
        try:
            model = onnx.load_from_string(bytes(model))
        except Exception as exc:  # noqa: BLE001 - onnx raises several types for a bad file
            raise BundleError(f"model: not a readable ONNX model ({type(exc).__name__})") from None
    try:
        lm = layers(materialise(load_model(model), weights, seed), materialised=True)
    except SlicingError as exc:
        raise BundleError(f"model: {exc}") from None
    ids = [layer.id for layer in lm.layers]
    plan_ids = [x["layer"] for x in doc.get("layers", [])]
    if plan_ids and plan_ids != ids:
        raise BundleError(f"model: the plan's {len(plan_ids)} layers are not this model's {len(ids)} layers")
    devices = {d.id: d for d in parse_devices(device_specs)}
    missing = sorted({s["device"] for s in doc["slices"]} - set(devices))
    if missing:
        raise BundleError(f"devices: no spec for the plan's device(s) {', '.join(missing)} (give ID=openvino[:DEVICE][,k=v])")
    spans = [(s["first_index"], s["last_index"]) for s in doc["slices"]]
    try:
        models = split_model(lm, spans)
    except SlicingError as exc:
        raise BundleError(f"plan.slices: {exc}") from None
    int8 = [i for i, s in enumerate(doc["slices"]) if devices[s["device"]].precision == "int8"]
    if int8:
        feeds = [random_inputs(lm, seed + i) for i in range(8)]
        names = [x for i in int8 for x in boundary(lm, *spans[i])[0]]
        values = capture(lm, names, feeds)
        for i in int8:
            ins = boundary(lm, *spans[i])[0]
            models[i] = quantize(models[i], devices[doc["slices"][i]["device"]], [{k: v[k] for k in ins} for v in values])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    slices = []
    for i, (s, m) in enumerate(zip(doc["slices"], models)):
        data = m.SerializeToString()
        name = f"slice-{i}.onnx"
        (out / name).write_bytes(data)
        ins, outs = boundary(lm, *spans[i])
        slices.append({"index": i, "first_layer": s["first_layer"], "last_layer": s["last_layer"],
                       "first_index": s["first_index"], "last_index": s["last_index"], "device": s["device"],
                       "predicted_ms": s.get("time_ms"), "file": name, "sha256": sha256_hex(data), "bytes": len(data),
                       "inputs": [_tensor(lm, x) for x in ins], "outputs": [_tensor(lm, x) for x in outs],
                       "settings": _runtime_settings(devices[s["device"]])})
    regime = doc.get("regime") or {}
    manifest = {"format": FORMAT, "plan_id": plan_id, "model": doc.get("model"), "notation": doc.get("notation", ""),
                "predicted_latency_ms": (doc.get("metrics") or {}).get("latency_ms"),
                "pool": slice_policy(regime.get("pool") or "auto", len(slices)),
                "inputs": [_tensor(lm, x) for x in lm.graph_inputs], "outputs": [_tensor(lm, x) for x in lm.graph_outputs],
                "slices": slices}
    (out / MANIFEST).write_bytes(manifest_bytes(manifest))
    return manifest


def manifest_bytes(manifest: Mapping) -> bytes:
    """The manifest's canonical bytes (sorted keys): its sha256 is the bundle's id."""
    return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()


def read_manifest(data: bytes) -> dict:
    """A manifest parsed and checked for the fields a board reads; BundleError naming the field."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise BundleError(f"manifest: {len(data)} bytes, over {MAX_MANIFEST_BYTES}")
    try:
        m = json.loads(data)
    except ValueError as exc:
        raise BundleError(f"manifest: not JSON ({exc})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise BundleError(f"manifest.format: expected '{FORMAT}'")
    if not isinstance(m.get("slices"), list) or not m["slices"]:
        raise BundleError("manifest.slices: no slices")
    for i, s in enumerate(m["slices"]):
        for key in ("file", "sha256", "bytes", "inputs", "outputs", "settings"):
            if key not in s:
                raise BundleError(f"manifest.slices[{i}].{key}: missing")
        if "/" in s["file"] or s["file"].startswith("."):
            raise BundleError(f"manifest.slices[{i}].file: '{s['file']}' must be a plain file name")
    return m


def verified_files(manifest: Mapping, directory: str | os.PathLike) -> list[bytes]:
    """Each slice's file, checked against the manifest's size and sha256: a truncated or
    altered file is refused (BundleError naming it) before anything is built."""
    out = []
    for i, s in enumerate(manifest["slices"]):
        path = Path(directory) / s["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BundleError(f"manifest.slices[{i}].file: {s['file']} cannot be read ({exc.strerror})") from None
        if len(data) != s["bytes"]:
            raise BundleError(f"manifest.slices[{i}].bytes: {s['file']} has {len(data)} bytes, the manifest says "
                              f"{s['bytes']} (truncated?)")
        if sha256_hex(data) != s["sha256"]:
            raise BundleError(f"manifest.slices[{i}].sha256: {s['file']} does not match its sha256")
        out.append(data)
    return out


class BundleRunner:
    """The Python executor on a bundle: one session per slice file, built with the
    manifest's device spec (executor.runtime), run by the same loop as SlicedModel."""

    def __init__(self, directory: str | os.PathLike, expect_sha256: str | None = None):
        raw = (Path(directory) / MANIFEST).read_bytes()
        if expect_sha256 is not None and sha256_hex(raw) != expect_sha256:
            raise BundleError("manifest: its sha256 is not the bundle id asked for")
        self.manifest = read_manifest(raw)
        files = verified_files(self.manifest, directory)
        specs = {s["device"]: s["settings"]["spec"] for s in self.manifest["slices"]}
        devices = {d.id: d for d in parse_devices(specs.values())}
        self.pool_policy = self.manifest.get("pool", "stop")
        self.steps = []
        for s, data in zip(self.manifest["slices"], files):
            dev = devices[s["device"]]
            session = build_session(data, dev, self.pool_policy if dev.runtime == "onnxruntime" else "stop")
            self.steps.append((session, [x["name"] for x in s["inputs"]], [x["name"] for x in s["outputs"]], pinned(dev)))
        self.outputs = [x["name"] for x in self.manifest["outputs"]]
        self._last_use = {x: i for i, (_, ins, _, _) in enumerate(self.steps) for x in ins}
        self.clock = clock_ns("wall")

    def run_timed(self, inputs: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[float]]:
        env = dict(inputs)
        times = run_slices(self.steps, env, self.clock, self._last_use, set(self.outputs))
        return {o: env[o] for o in self.outputs}, times


def bundle_inputs(manifest: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs of the manifest's shapes (as slicing.random_inputs draws them)."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in manifest["inputs"]:
        dt = np.dtype(t["dtype"])
        out[t["name"]] = rng.standard_normal(t["shape"]).astype(dt) if np.issubdtype(dt, np.floating) else np.zeros(t["shape"], dt)
    return out
