"""OpenVINO: reads the ONNX slice directly and compiles it for an OpenVINO device (CPU
here; GPU or NPU where the plug-ins find one). `ID=openvino[:DEVICE][,key=value,...]`:
`threads` sets INFERENCE_NUM_THREADS, `affinity` pins the calling thread and the threads
created while building (as for ONNX Runtime), `precision=int8` runs the QDQ model
executor.quantize makes (OpenVINO executes QDQ ONNX in int8), `precision=bf16` lets
OpenVINO compute in bfloat16; every other key is an OpenVINO property of DEVICE, checked
against the ones it supports when the spec is parsed.

A session compiles with one stream and the LATENCY hint (one inference at a time, as a
slice runs) and the inference precision of the device's `precision` (fp32: f32, where
OpenVINO's default on CPUs with bf16 units is bf16, about twice as fast and outputs
within bf16's rounding). ONNX Runtime's thread-pool policies do not apply: OpenVINO's
threads are its own.
"""

from __future__ import annotations

import threading
from typing import Mapping, Sequence

import openvino as ov

_CORE: ov.Core | None = None
_LOCK = threading.Lock()


def core() -> ov.Core:
    global _CORE
    with _LOCK:
        if _CORE is None:
            _CORE = ov.Core()
        return _CORE


class _Session:
    """A compiled slice with onnxruntime.InferenceSession's `run`: one infer request
    per calling thread (a request serves one inference at a time)."""

    def __init__(self, compiled: ov.CompiledModel):
        self.compiled = compiled
        self._ports = {}
        for port in compiled.outputs:
            for name in port.get_names():
                self._ports.setdefault(name, port)
        self._local = threading.local()

    def run(self, output_names: Sequence[str] | None, feed: Mapping) -> list:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self.compiled.create_infer_request()
        result = request.infer(dict(feed))  # outputs copied: a later run does not overwrite them
        names = output_names or [o.get_any_name() for o in self.compiled.outputs]
        return [result[self._ports[n]] for n in names]

    def get_inputs(self) -> list:
        return [_Named(p.get_any_name()) for p in self.compiled.inputs]

    def get_outputs(self) -> list:
        return [_Named(p.get_any_name()) for p in self.compiled.outputs]


class _Named:
    def __init__(self, name: str):
        self.name = name


# what a device's `precision` runs as: int8 is the QDQ model, the rest of it in f32 as on
# ONNX Runtime; bf16 is OpenVINO's own (its default on CPUs with bf16 units)
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}


class OpenVino:
    name = "openvino"
    precisions = tuple(PRECISION_HINTS)
    pool_policies = False
    places_pool_threads = False  # its threads inherit the caller's cores

    def version(self) -> str:
        return f"openvino {ov.get_version().split('-')[0]}"

    def targets(self) -> list[str]:
        return list(core().available_devices)

    def check(self, device) -> list[str]:  # noqa: ANN001
        available = self.targets()
        if device.provider not in available:
            return [f"OpenVINO device '{device.provider}' is not available (openvino.Core().available_devices: "
                    f"{', '.join(available) or 'none'})"]
        supported = set(core().get_property(device.provider, "SUPPORTED_PROPERTIES"))
        bad = [k for k, _ in device.provider_options if k not in supported]
        if bad:
            return [f"{', '.join(repr(k) for k in bad)} {'is' if len(bad) == 1 else 'are'} not a property of OpenVINO {device.provider} (keys here: "
                    "threads, affinity, precision, or one of Core().get_property("
                    f"'{device.provider}', 'SUPPORTED_PROPERTIES'), e.g. PERFORMANCE_HINT=LATENCY)"]
        if device.threads is not None and "INFERENCE_NUM_THREADS" not in supported:
            return [f"threads: OpenVINO {device.provider} has no INFERENCE_NUM_THREADS"]
        return []

    def config(self, device) -> dict:  # noqa: ANN001
        supported = set(core().get_property(device.provider, "SUPPORTED_PROPERTIES"))
        cfg: dict = {"PERFORMANCE_HINT": "LATENCY"}
        if "NUM_STREAMS" in supported:
            cfg["NUM_STREAMS"] = "1"
        if "INFERENCE_PRECISION_HINT" in supported:
            cfg["INFERENCE_PRECISION_HINT"] = PRECISION_HINTS[device.precision]
        if device.threads is not None:
            cfg["INFERENCE_NUM_THREADS"] = str(device.threads)
        cfg.update(dict(device.provider_options))  # the spec wins
        return cfg

    def build(self, model, device, policy: str) -> _Session:  # noqa: ANN001
        c = core()
        try:
            m = c.read_model(model, b"") if isinstance(model, (bytes, bytearray)) else c.read_model(str(model))
            return _Session(c.compile_model(m, device.provider, self.config(device)))
        except RuntimeError as exc:  # OpenVINO's multi-line report: the lines that say why, on one
            why = [x.strip() for x in str(exc).splitlines() if x.strip() and not x.startswith(("Exception from", "Check 'false'"))]
            raise RuntimeError(f"OpenVINO cannot build this slice on {device.id} ({device.provider}): "
                               + " ".join(why)[:400]) from None

    def quantize(self, model, calibration):  # noqa: ANN001
        from executor.quantize import quantize_int8

        return quantize_int8(model, calibration)


RUNTIME = OpenVino()
