"""Communication cost models: MOSAIC's linear regression (eq. 1-2) and the
polynomial-in-bytes form of Kang et al. Each fits from (bytes, ms) points."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)


@dataclass(frozen=True)
class LinearCommModel:
    """c = alpha * bytes + beta  (eq. 1 for inputs, eq. 2 for outputs)."""

    alpha_ms_per_byte: float
    beta_ms: float
    r2: float | None = None

    @classmethod
    def fit(cls, sizes_bytes: Sequence[float], times_ms: Sequence[float]) -> "LinearCommModel":
        """Ordinary least squares. A negative fitted coefficient is physically
        meaningless (data too noisy near zero); it is refitted with that term at 0."""
        x = np.asarray(sizes_bytes, dtype=float)
        y = np.asarray(times_ms, dtype=float)
        if x.shape != y.shape or x.size < 2 or np.unique(x).size < 2:
            raise ValueError("need points at two or more distinct tensor sizes")
        A = np.column_stack([x, np.ones_like(x)])
        (alpha, beta), *_ = np.linalg.lstsq(A, y, rcond=None)
        if beta < 0:
            alpha, beta = float((x @ y) / (x @ x)), 0.0
        if alpha < 0:
            alpha, beta = 0.0, float(y.mean())
        return cls(float(alpha), float(beta), _r2(y, alpha * x + beta))

    def predict_ms(self, size_bytes):
        return self.alpha_ms_per_byte * np.asarray(size_bytes, dtype=float) + self.beta_ms


@dataclass(frozen=True)
class PolynomialCommModel:
    """c = c0 + c1*bytes + c2*bytes^2 + ...  (Kang et al.'s fitted memcpy/map curves)."""

    coeffs_ms: tuple[float, ...]
    r2: float | None = None

    @classmethod
    def fit(cls, sizes_bytes: Sequence[float], times_ms: Sequence[float], degree: int = 2) -> "PolynomialCommModel":
        x = np.asarray(sizes_bytes, dtype=float)
        y = np.asarray(times_ms, dtype=float)
        if np.unique(x).size <= degree:
            raise ValueError(f"need points at {degree + 1} or more distinct tensor sizes for degree {degree}")
        scale = float(np.abs(x).max()) or 1.0  # conditioning: fit on bytes/scale
        c = np.polynomial.polynomial.polyfit(x / scale, y, degree)
        coeffs = tuple(float(ci / scale**i) for i, ci in enumerate(c))
        model = cls(coeffs)
        return cls(coeffs, _r2(y, model.predict_ms(x)))

    def predict_ms(self, size_bytes):
        x = np.asarray(size_bytes, dtype=float)
        out = np.zeros_like(x)
        for c in reversed(self.coeffs_ms):  # Horner
            out = out * x + c
        return np.maximum(out, 0.0)
