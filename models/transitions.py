"""AxoNN's inter-accelerator transition costs (section 3.1, eq. 2, 3, 6) compiled into
the Problem's adjacent-layer arrays pair_*[k, a, b] (layer k on target a, k+1 on b).

At a boundary where the device changes (da != db), eq. 3/6 add
    tau(L_k, da, OUT) + tau(L_k+1, db, IN)            (time and energy alike)
OUT is paid on the source as layer k's output leaves its private caches, IN on the
destination as layer k+1 starts cold. Each is the layer's measured value
(`Layer.transition_costs`) or, failing that, the platform's curve for that device,
direction and op type (`Platform.transition_costs`) at the tensor's bytes (OUT: layer
k's output_bytes, IN: layer k+1's input_bytes); no curve = free.

Eq. 2's pipeline term: on a hardware-pipelined accelerator (`Device.pipeline_units`)
a layer whose predecessor used another sub-unit of the same device streams its input
engine to engine and was profiled that way; whenever a transition separates them
(TR_k = 1, a != b) it loses that saving gamma(L_k+1, db) (`pipeline_saving_ms/_mj`).

A frequency change on the same device (a != b, da == db) is a transition in the
Assignment.n_transitions sense (it counts against max_transitions, and it breaks a
hardware pipeline) but moves no data between private caches, so it pays no OUT/IN.
The diagonal (same target) stays 0 here. Existing device-pair `Platform.transitions`
polynomials are added on top.

Fig. 3 shows transition time is not one straight line in tensor size (the DLA's
convolution buffer makes a knee), so each curve is fitted by one of: linear,
quadratic, cubic, or continuous piecewise-linear with one or two knots (knots searched
among the gaps between measured sizes). Sizes span orders of magnitude and the noise
is proportional, so fits minimise relative error (weights 1/y^2). The model is chosen
by leave-one-out relative error, knots re-chosen inside every fold (exact, via the
deleted-residual identity), with the one-standard-error rule: the fewest parameters
whose error is within one standard error of the best. The chosen knots are then moved
within their gaps to the least error.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from planner.core.errors import InputError, Issue, format_path
from planner.core.names import did_you_mean

CANDIDATES = ("linear", "poly2", "poly3", "pwl1", "pwl2")
N_PARAMS = {"constant": 1, "linear": 2, "poly2": 3, "poly3": 4, "pwl1": 4, "pwl2": 6}  # knots count as parameters
MIN_SIDE = 2  # measured sizes on each side of (and between) knots


@dataclass(frozen=True)
class CurveFit:
    """A fitted cost curve y(bytes): y = sum coeffs * basis(bytes / scale). Beyond the
    largest measured size it continues along its end tangent (never decreasing);
    predictions are clipped at 0."""

    kind: str  # constant | linear | poly2 | poly3 | pwl1 | pwl2 | interpolate
    coeffs: tuple[float, ...]
    knots_bytes: tuple[float, ...]  # pwl knots; for interpolate the x of each point
    scale_bytes: float
    min_bytes: float
    max_bytes: float
    rmse: float  # on the fitted points, in the curve's unit
    max_abs_error: float
    mape_pct: float  # mean |error| / y over points with y > 0
    loo_rmse: float | None  # leave-one-out root-mean-square relative error (None: interpolate / too few points)
    candidates_loo: tuple[tuple[str, float], ...] = ()  # every candidate's leave-one-out relative error
    n_points: int = 0

    def _raw(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "interpolate":
            xs, ys = np.asarray(self.knots_bytes), np.asarray(self.coeffs)
            if xs.size == 1:
                return np.full_like(x, ys[0])
            out = np.interp(x, xs, ys)
            lo, hi = x < xs[0], x > xs[-1]
            s0 = (ys[1] - ys[0]) / (xs[1] - xs[0])
            s1 = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            out = np.where(lo, ys[0] + s0 * (x - xs[0]), out)
            return np.where(hi, ys[-1] + max(s1, 0.0) * (x - xs[-1]), out)
        return _design(self.kind, x / self.scale_bytes, tuple(k / self.scale_bytes for k in self.knots_bytes)) @ np.asarray(self.coeffs)

    def predict(self, size_bytes) -> np.ndarray:
        x = np.asarray(size_bytes, dtype=float)
        if self.kind == "interpolate":
            return np.maximum(self._raw(x), 0.0)
        top = self.max_bytes
        inside = self._raw(np.minimum(x, top))
        if self.kind in ("constant",) or not (x > top).any():
            return np.maximum(inside, 0.0)
        h = max(top * 1e-6, 1.0)
        y_top, y_below = self._raw(np.array([top, top - h]))
        slope = max((y_top - y_below) / h, 0.0)
        return np.maximum(np.where(x > top, y_top + slope * (x - top), inside), 0.0)

    def describe(self) -> str:
        knots = ""
        if self.kind.startswith("pwl"):
            knots = " knots " + ", ".join(f"{k / 1e6:.3g} MB" for k in self.knots_bytes)
        loo = f", leave-one-out relative error {100 * self.loo_rmse:.2f}%" if self.loo_rmse is not None else ""
        return f"{self.kind}{knots}: RMSE {self.rmse:.4g}, max error {self.max_abs_error:.4g}, MAPE {self.mape_pct:.2f}%{loo} ({self.n_points} points)"


def _design(kind: str, x: np.ndarray, knots: Sequence[float] = ()) -> np.ndarray:
    cols = [np.ones_like(x)]
    if kind == "constant":
        return np.column_stack(cols)
    cols.append(x)
    if kind == "poly2":
        cols.append(x * x)
    elif kind == "poly3":
        cols += [x * x, x * x * x]
    elif kind.startswith("pwl"):
        cols += [np.maximum(x - k, 0.0) for k in knots]
    return np.column_stack(cols)


def _knot_sets(xs_unique: np.ndarray, n_knots: int) -> list[tuple[float, ...]]:
    gaps = (xs_unique[:-1] + xs_unique[1:]) / 2.0  # gap g lies after unique size g
    out = []
    for combo in itertools.combinations(range(len(gaps)), n_knots):
        sides = [combo[0] + 1] + [b - a for a, b in zip(combo, combo[1:])] + [len(xs_unique) - 1 - combo[-1]]
        if min(sides) >= MIN_SIDE:
            out.append(tuple(float(gaps[g]) for g in combo))
    return out


def _fit_family(kind: str, x: np.ndarray, y: np.ndarray, sw: np.ndarray):
    """Best coefficients (and knots) on all points by weighted least squares (sqrt
    weights `sw`), and the exact leave-one-out weighted errors, (n,), with the knot
    choice repeated inside every fold (None when some fold is singular)."""
    n = x.size
    y = y * sw
    if kind.startswith("pwl"):
        knot_sets = _knot_sets(np.unique(x), int(kind[-1]))
        if not knot_sets:
            raise ValueError("too few distinct sizes for the knots")
    else:
        knot_sets = [()]
    A = np.stack([_design(kind, x, knots) for knots in knot_sets]) * sw[None, :, None]  # (K, n, p), all knot sets at once
    Q, R = np.linalg.qr(A)
    rhs = np.einsum("knp,n->kp", Q, y)
    try:
        coef = np.linalg.solve(R, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:  # a rank-deficient design: least squares one by one
        coef = np.stack([np.linalg.lstsq(R[k], rhs[k], rcond=None)[0] for k in range(len(knot_sets))])
    resid = y[None, :] - np.einsum("knp,kp->kn", A, coef)
    lev = np.minimum((Q * Q).sum(axis=2), 1.0)  # leverages: diag of each hat matrix
    sse = (resid * resid).sum(axis=1)
    b = int(np.argmin(sse))
    ok = lev < 1.0 - 1e-9
    denom = np.where(ok, 1.0 - lev, 1.0)
    loo_err = np.where(ok, resid / denom, np.inf)  # prediction error at i when fitted without i
    deleted_sse = np.where(ok, sse[:, None] - resid**2 / denom, np.inf)  # SSE of the fit without i
    chosen = deleted_sse.argmin(axis=0)  # the knots each fold would pick
    e = loo_err[chosen, np.arange(n)]
    return knot_sets[b], coef[b], (e if np.isfinite(e).all() and n > N_PARAMS[kind] else None)


def _refine_knots(kind: str, x: np.ndarray, y: np.ndarray, sw: np.ndarray, knots: tuple[float, ...]):
    """Move each knot within the gap it was found in (between its neighbouring measured
    sizes) to the least weighted SSE: golden section, two coordinate passes."""
    ux = np.unique(x)
    yw = y * sw

    def fit(ks):
        A = _design(kind, x, ks) * sw[:, None]
        coef = np.linalg.lstsq(A, yw, rcond=None)[0]
        r = yw - A @ coef
        return float(r @ r), coef

    ks = list(knots)
    g = (math.sqrt(5) - 1) / 2
    for _ in range(2):
        for j in range(len(ks)):
            i = int(np.searchsorted(ux, ks[j]))
            lo, hi = ux[i - 1], ux[i]
            a, b = lo, hi
            def sse(k):  # noqa: E306
                trial = ks.copy()
                trial[j] = k
                return fit(tuple(trial))[0]
            u1, u2 = b - g * (b - a), a + g * (b - a)
            f1, f2 = sse(u1), sse(u2)
            for _ in range(40):
                if f1 <= f2:
                    b, u2, f2 = u2, u1, f1
                    u1 = b - g * (b - a)
                    f1 = sse(u1)
                else:
                    a, u1, f1 = u1, u2, f2
                    u2 = a + g * (b - a)
                    f2 = sse(u2)
            best_k = u1 if f1 <= f2 else u2
            if sse(best_k) < sse(ks[j]):
                ks[j] = best_k
    return tuple(float(k) for k in ks), fit(tuple(ks))[1]


def _metrics(y: np.ndarray, pred: np.ndarray) -> tuple[float, float, float]:
    err = pred - y
    pos = y > 0
    mape = float(np.mean(np.abs(err[pos]) / y[pos]) * 100) if pos.any() else 0.0
    return float(np.sqrt(np.mean(err**2))), float(np.abs(err).max()), mape


def fit_curve(sizes_bytes: Sequence[float], values: Sequence[float], model: str = "auto") -> CurveFit:
    """Fit one cost curve. `model` is a schema TransitionFit name; auto applies the
    one-standard-error rule to the candidates' leave-one-out relative errors."""
    x = np.asarray(sizes_bytes, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.shape != y.shape or x.size == 0:
        raise ValueError("need one value per size")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    lo, hi = float(x.min()), float(x.max())
    if model == "interpolate":
        xs, idx = np.unique(x, return_index=True)
        if xs.size != x.size:
            raise ValueError("interpolate needs one point per size")
        fit = CurveFit("interpolate", tuple(float(v) for v in y[idx]), tuple(float(v) for v in xs), 1.0, lo, hi, 0.0, 0.0, 0.0, None, (), int(x.size))
        return fit
    scale = hi if hi > 0 else 1.0
    xs = x / scale
    n_unique = np.unique(x).size
    if model == "auto":
        kinds = [k for k in CANDIDATES if n_unique >= N_PARAMS[k] + 1 and x.size >= N_PARAMS[k] + 2]
        if not kinds:
            kinds = ["linear"] if n_unique >= 2 else ["constant"]
    else:
        kinds = [model]
    floor = 1e-3 * float(np.abs(y).max()) if np.abs(y).max() > 0 else 1.0
    sw = 1.0 / np.maximum(np.abs(y), floor)
    results = []
    for kind in kinds:
        try:
            knots, coef, e = _fit_family(kind, xs, y, sw)
        except ValueError:
            continue
        results.append((kind, knots, coef, e))
    if not results:
        raise ValueError(f"cannot fit '{model}' to {n_unique} distinct sizes")
    rms = {r[0]: float(np.sqrt(np.mean(r[3] ** 2))) if r[3] is not None else math.inf for r in results}
    chosen = results[0]
    if model == "auto":
        best = min(results, key=lambda r: (rms[r[0]], N_PARAMS[r[0]]))
        if best[3] is not None:
            sq = best[3] ** 2
            se = float(np.std(sq, ddof=1) / np.sqrt(sq.size)) if sq.size > 1 else 0.0
            bar = float(np.mean(sq)) + se  # one standard error above the best mean squared error
            chosen = min((r for r in results if r[3] is not None and float(np.mean(r[3] ** 2)) <= bar),
                         key=lambda r: (N_PARAMS[r[0]], rms[r[0]]))
        else:
            chosen = best
    kind, knots, coef, _ = chosen
    if kind.startswith("pwl"):
        knots, coef = _refine_knots(kind, xs, y, sw, knots)
    loo = rms[kind] if math.isfinite(rms[kind]) else None
    fit = CurveFit(kind, tuple(float(c) for c in coef), tuple(k * scale for k in knots), scale, lo, hi, 0, 0, 0, loo,
                   tuple((r[0], rms[r[0]]) for r in results), int(x.size))
    rmse, mx, mape = _metrics(y, fit.predict(x))
    return CurveFit(fit.kind, fit.coeffs, fit.knots_bytes, scale, lo, hi, rmse, mx, mape, loo, fit.candidates_loo, int(x.size))


@dataclass(frozen=True)
class TransitionModel:
    """One platform transition curve, fitted for time and for energy."""

    device: str
    direction: str
    op_types: tuple[str, ...] | None
    time: CurveFit
    energy: CurveFit
    index: int  # position in Platform.transition_costs

    @property
    def label(self) -> str:
        ops = ",".join(self.op_types) if self.op_types else "*"
        return f"{self.device}/{self.direction}/{ops}"


@functools.lru_cache(maxsize=512)
def _fit_cached(points: tuple[tuple[int, float, float], ...], model: str) -> tuple[CurveFit, CurveFit]:
    b = [p[0] for p in points]
    return fit_curve(b, [p[1] for p in points], model), fit_curve(b, [p[2] for p in points], model)


def fit_platform(platform) -> list[TransitionModel]:
    """Every `Platform.transition_costs` curve, fitted (cached by content)."""
    out = []
    for i, cv in enumerate(platform.transition_costs):
        pts = tuple((p.bytes, p.time_ms, p.energy_mj) for p in cv.points)
        try:
            t_fit, e_fit = _fit_cached(pts, cv.model)
        except (ValueError, np.linalg.LinAlgError) as exc:
            raise InputError([Issue(format_path(("transition_costs", i, "points")), str(exc))]) from None
        out.append(TransitionModel(cv.device, cv.direction, tuple(cv.op_types) if cv.op_types else None, t_fit, e_fit, i))
    return out


def fit_report(platform) -> list[dict]:
    """The fits in plain data (CLI, API, bench): model, knots and error per curve."""
    rows = []
    for m in fit_platform(platform):
        for what, f, unit in (("time", m.time, "ms"), ("energy", m.energy, "mJ")):
            rows.append({
                "curve": m.label, "index": m.index, "quantity": what, "unit": unit, "model": f.kind,
                "knots_bytes": list(f.knots_bytes) if f.kind.startswith("pwl") else [],
                "rmse": f.rmse, "max_abs_error": f.max_abs_error, "mape_pct": f.mape_pct,
                "loo_rmse": f.loo_rmse, "candidates_loo_rmse": dict(f.candidates_loo), "points": f.n_points,
                "bytes_range": [f.min_bytes, f.max_bytes],
            })
    return rows


@dataclass
class _Lookup:
    models: dict[tuple[str, str, str | None], TransitionModel] = field(default_factory=dict)

    def get(self, device: str, direction: str, op: str) -> TransitionModel | None:
        return self.models.get((device, direction, op)) or self.models.get((device, direction, None))


def has_transition_model(platform, profile) -> bool:
    return bool(
        platform.transitions
        or platform.transition_costs
        or any(layer.transition_costs for layer in profile.layers)
    )


def transition_arrays(platform, profile, targets, notes: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """pair_time_ms, pair_energy_mj of shape (L-1, T, T), or None when the platform and
    profile model no transition cost at all (the Problem then has no pair arrays)."""
    if not has_transition_model(platform, profile):
        return None
    from models.communication import PolynomialCommModel

    layers = profile.layers
    L, T = len(layers), len(targets)
    dev_ids = [d.id for d in platform.devices]
    dev_index = {d: i for i, d in enumerate(dev_ids)}
    D = len(dev_ids)
    ops = [layer.op_type for layer in layers]
    out_b = np.array([layer.output_bytes for layer in layers], dtype=float)
    in_b = np.array([layer.input_bytes for layer in layers], dtype=float)

    lookup = _Lookup()
    for m in fit_platform(platform):
        for op in m.op_types or (None,):
            lookup.models[(m.device, m.direction, op)] = m

    # per layer x device: OUT and IN (time, energy), and the pipeline saving gamma
    cost = {k: np.zeros((L, D)) for k in ("out_t", "out_e", "in_t", "in_e", "gam_t", "gam_e")}
    extrapolated: set[str] = set()
    for d, did in enumerate(dev_ids):
        for direction, sizes in (("out", out_b), ("in", in_b)):
            for op in set(ops):
                m = lookup.get(did, direction, op)
                if m is None:
                    continue
                rows = np.array([i for i, o in enumerate(ops) if o == op])
                cost[f"{direction}_t"][rows, d] = m.time.predict(sizes[rows])
                cost[f"{direction}_e"][rows, d] = m.energy.predict(sizes[rows])
                if (sizes[rows] > m.time.max_bytes).any() or (sizes[rows] < m.time.min_bytes).any():
                    extrapolated.add(m.label)
    issues = []
    for i, layer in enumerate(layers):
        for j, tc in enumerate(layer.transition_costs):
            if tc.device not in dev_index:
                issues.append(Issue(format_path(("layers", i, "transition_costs", j, "device")),
                                    f"unknown device '{tc.device}' ({did_you_mean(tc.device, dev_ids)}platform has {', '.join(dev_ids)})"))
                continue
            d = dev_index[tc.device]
            if tc.out_time_ms is not None:
                cost["out_t"][i, d], cost["out_e"][i, d] = tc.out_time_ms, tc.out_energy_mj
            if tc.in_time_ms is not None:
                cost["in_t"][i, d], cost["in_e"][i, d] = tc.in_time_ms, tc.in_energy_mj
            cost["gam_t"][i, d], cost["gam_e"][i, d] = tc.pipeline_saving_ms, tc.pipeline_saving_mj
    if issues:
        raise InputError(issues)
    for label in sorted(extrapolated):
        notes.append(f"transition curve {label}: some tensors lie outside the measured sizes; the fit is extrapolated")

    # pipeline break applies at boundary k on destination device d when both layers
    # map to different sub-units of d (eq. 2)
    brk = np.zeros((max(L - 1, 0), D), dtype=bool)
    for d, dev in enumerate(platform.devices):
        units = dev.pipeline_units
        if not units:
            continue
        for k in range(L - 1):
            u0, u1 = units.get(ops[k]), units.get(ops[k + 1])
            brk[k, d] = u0 is not None and u1 is not None and u0 != u1
    missing_gamma = [d for d, dev in enumerate(platform.devices) if dev.pipeline_units and not cost["gam_t"][:, d].any()]
    for d in missing_gamma:
        notes.append(f"device '{dev_ids[d]}' is hardware-pipelined but no layer gives a pipeline_saving on it; breaks cost nothing")

    dev_of = np.array([t.device_index for t in targets])
    nb = max(L - 1, 0)
    pair_t = np.zeros((nb, T, T))
    pair_e = np.zeros((nb, T, T))
    if nb:
        diff_dev = dev_of[:, None] != dev_of[None, :]  # (T, T)
        diff_tgt = ~np.eye(T, dtype=bool)
        # OUT on the source (layer k), IN on the destination (layer k+1), device changes only
        for c, (o, n) in (("t", ("out_t", "in_t")), ("e", ("out_e", "in_e"))):
            arr = pair_t if c == "t" else pair_e
            src = cost[o][:-1][:, dev_of]  # (L-1, T) cost if the source target is a
            dst = cost[n][1:][:, dev_of]  # (L-1, T) cost if the destination target is b
            arr += (src[:, :, None] + dst[:, None, :]) * diff_dev[None]
            gam = np.where(brk[:, dev_of], cost["gam_" + c][1:][:, dev_of], 0.0)  # (L-1, T) by destination
            arr += gam[:, None, :] * diff_tgt[None]
        for tr in platform.transitions:
            a, b = dev_index[tr.from_device], dev_index[tr.to_device]
            mask = np.outer(dev_of == a, dev_of == b) & diff_tgt
            pair_t[:, mask] += PolynomialCommModel(tuple(tr.time_coeffs_ms)).predict_ms(out_b[:-1])[:, None]
            pair_e[:, mask] += PolynomialCommModel(tuple(tr.energy_coeffs_mj)).predict_ms(out_b[:-1])[:, None]
    return pair_t, pair_e
