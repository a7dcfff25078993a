"""int8 for a runtime device with precision=int8: ONNX Runtime's static QDQ quantisation
(`onnxruntime.quantization.quantize_static`), calibrated on given or random inputs.

A (sub-)model keeps float inputs and outputs: QuantizeLinear at its inputs and
DequantizeLinear at its outputs, which ORT fuses with the operators between them into
integer kernels (QLinearConv, ...). So an int8 slice pays quantise/dequantise exactly
at its boundary, where the precision changes (muLayer section 4: uint8 activations on
the CPU), and the profile's per-slice transfer cost of the int8 device carries it.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Iterable, Sequence

import numpy as np
import onnx

# int8 outputs against the fp32 model: ||int8 - fp32||_2 <= INT8_TOLERANCE * ||fp32||_2.
# Measured on the light models with seeded random weights, MinMax calibration on 8 random
# inputs, whole model int8: 0.002 (ResNet-50) to 0.29 (ShuffleNet); untrained weights
# quantise worse than trained ones, so this bound is loose on purpose.
INT8_TOLERANCE = 0.35
# Softmax stays fp32: QDQ gives its output a fixed 1/256 step, which zeroes the small
# probabilities of a 1000-class output; it is cheap, so quantising it buys nothing.
KEEP_FP32 = {"Softmax"}


class _Reader:
    """CalibrationDataReader over a list of feeds."""

    def __init__(self, feeds: Sequence[dict[str, np.ndarray]]):
        self.feeds = list(feeds)
        self.pos = 0

    def get_next(self):
        if self.pos >= len(self.feeds):
            return None
        self.pos += 1
        return self.feeds[self.pos - 1]

    def rewind(self):
        self.pos = 0


def quantize_int8(model: onnx.ModelProto, calibration: Iterable[dict[str, np.ndarray]]) -> onnx.ModelProto:
    """Static QDQ int8 copy of `model` (uint8 activations, int8 weights, MinMax
    calibration over `calibration`, each a feed of the model's inputs)."""
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    ort.set_default_logger_severity(3)  # the calibration sessions warn about unused initializers

    names = [i.name for i in model.graph.input]
    feeds = [{k: v for k, v in f.items() if k in names} for f in calibration]
    if not feeds:
        raise ValueError("int8 quantisation needs at least one calibration input")
    logging.getLogger("onnxruntime.quantization").setLevel(logging.ERROR)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_static logs a pre-processing hint per call
    try:
        with tempfile.TemporaryDirectory(prefix="executor-q8-") as tmp:
            src, dst = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "int8.onnx")
            onnx.save(model, src)
            from onnxruntime.quantization.registry import QDQRegistry

            from executor.ort_threads import sessions_on_own_cores

            with sessions_on_own_cores():  # its calibration sessions would take every core of the machine
                quantize_static(
                    src, dst, _Reader(feeds),
                    op_types_to_quantize=sorted(set(QDQRegistry) - KEEP_FP32),
                    quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"CalibTensorRangeSymmetric": False},
                )
            return onnx.load(dst)
    finally:
        root.setLevel(level)


def int8_error(reference: Sequence[np.ndarray], int8: Sequence[np.ndarray]) -> float:
    """Worst relative L2 error ||int8 - fp32|| / ||fp32|| over the outputs (the measure
    INT8_TOLERANCE bounds)."""
    worst = 0.0
    for a, b in zip(reference, int8):
        a64, b64 = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
        worst = max(worst, float(np.linalg.norm(a64 - b64) / (np.linalg.norm(a64) or 1.0)))
    return worst
