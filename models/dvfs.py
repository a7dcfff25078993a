"""DVFS estimators of MOSAIC: performance t = gamma/f + epsilon (eq. 3) and power
P = P_static + P_dyn,ref * V^2 f / (V_ref^2 f_ref) (eq. 4-5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class PerformanceModel:
    """t(f) = gamma / f + epsilon. gamma is in ms*MHz (cycles-like work), epsilon in ms
    (the frequency-independent part: memory stalls, fixed overheads)."""

    gamma_ms_mhz: float
    epsilon_ms: float

    @classmethod
    def fit(cls, freqs_mhz: Sequence[float], times_ms: Sequence[float]) -> "PerformanceModel":
        """Exact through two points (MOSAIC profiles min and max frequency); least
        squares in 1/f through more."""
        if len(freqs_mhz) != len(times_ms) or len(set(freqs_mhz)) < 2:
            raise ValueError("need measurements at two or more distinct frequencies")
        if len(freqs_mhz) == 2:  # the profiler's min/max pair: closed form, no lstsq per layer
            (f1, f2), (t1, t2) = freqs_mhz, times_ms
            gamma = (t1 - t2) / (1.0 / f1 - 1.0 / f2)
            return cls(float(gamma), float(t1 - gamma / f1))
        f = np.asarray(freqs_mhz, dtype=float)
        t = np.asarray(times_ms, dtype=float)
        A = np.column_stack([1.0 / f, np.ones_like(f)])
        (gamma, eps), *_ = np.linalg.lstsq(A, t, rcond=None)
        return cls(float(gamma), float(eps))

    def predict_ms(self, freq_mhz):
        return self.gamma_ms_mhz / np.asarray(freq_mhz, dtype=float) + self.epsilon_ms


@dataclass(frozen=True)
class PowerModel:
    """Eq. 4-5: dynamic power at a reference level (MOSAIC: the maximum frequency)
    scaled by V^2 f; static power per level is a property of the device."""

    dynamic_ref_w: float
    ref_freq_mhz: float
    ref_voltage_v: float | None

    @classmethod
    def fit(cls, total_power_w: float, static_power_w: float, freq_mhz: float, voltage_v: float | None) -> "PowerModel":
        return cls(max(total_power_w - static_power_w, 0.0), freq_mhz, voltage_v)

    def dynamic_w(self, freq_mhz: float, voltage_v: float | None) -> float:
        if self.ref_voltage_v is None or voltage_v is None:
            scale = freq_mhz / self.ref_freq_mhz
        else:
            scale = (voltage_v**2 * freq_mhz) / (self.ref_voltage_v**2 * self.ref_freq_mhz)
        return self.dynamic_ref_w * scale

    def predict_w(self, freq_mhz: float, voltage_v: float | None, static_power_w: float) -> float:
        return static_power_w + self.dynamic_w(freq_mhz, voltage_v)
