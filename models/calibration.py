"""Calibration of a profile: the per-slice communication cost (alpha per byte, beta per
slice end) that makes compile's prediction of each measured slice equal its measurement,
the device-switch (transition) fits from paired two-slice runs, and the uncertainties the
split margin reads. Pure numbers in, numbers out: `planner profile` measures and calls
these; bench/ and tests call them directly.
"""

from __future__ import annotations

import numpy as np

from models.communication import LinearCommModel


def fit_transfer(points: list[tuple[int, float]]) -> tuple[LinearCommModel, float]:
    """Least-squares c(bytes) on the per-size medians; (model, MAPE % on those medians)."""
    by_size: dict[int, list[float]] = {}
    for b, t in points:
        by_size.setdefault(b, []).append(t)
    sizes = sorted(by_size)
    med = np.array([np.median(by_size[b]) for b in sizes])
    model = LinearCommModel.fit(sizes, med)
    pred = model.predict_ms(np.array(sizes, dtype=float))
    mape = float(np.mean(np.abs(pred - med) / np.maximum(med, 1e-9)) * 100.0)
    return model, mape


def slice_prediction(layer_ms, in_b, out_b, alpha: float, beta: float, a: int, b: int) -> float:
    """What models.compile + the evaluator predict for layers a..b as one slice: each
    layer's total minus its estimated in/out (clipped at 0, as compile does), plus the
    slice's own in and out."""
    c_in, c_out = alpha * in_b[a:b + 1] + beta, alpha * out_b[a:b + 1] + beta
    return float(np.maximum(layer_ms[a:b + 1] - c_in - c_out, 0.0).sum() + c_in[0] + c_out[-1])


def _fit_loss(layer_ms, in_b, out_b, chunk_ms: dict, stat):
    """(alpha, beta) -> the calibration's loss: each measured slice's relative squared
    error of the prediction compile will make, weighted by its length."""
    spans = [(a, b, float(stat(v))) for (a, b), v in chunk_ms.items()]

    def loss(al: float, be: float) -> float:
        return sum((b - a + 1) * ((slice_prediction(layer_ms, in_b, out_b, al, be, a, b) - m) / m) ** 2 for a, b, m in spans)
    return loss


def _refine(layer_ms, in_b, out_b, chunk_ms: dict, stat, alpha: float, beta: float) -> tuple[float, float]:
    """The linear solution ignores that compile clips a layer's execution at 0 where the
    estimated in/out exceeds its measured total; refine (alpha, beta) on a shrinking grid
    against the prediction compile will actually make (relative squared error)."""
    loss = _fit_loss(layer_ms, in_b, out_b, chunk_ms, stat)
    a_step = max(alpha, 1e-9) * 0.5
    b_step = max(beta, 1e-4 * float(np.median(layer_ms))) * 0.5
    best = (loss(alpha, beta), alpha, beta)
    for _ in range(12):
        _, a0, b0 = best
        for da in (-1, 0, 1):
            for db in (-1, 0, 1):
                al, be = max(0.0, a0 + da * a_step), max(0.0, b0 + db * b_step)
                v = loss(al, be)
                if v < best[0]:
                    best = (v, al, be)
        if best[1:] == (a0, b0):
            a_step, b_step = a_step / 2, b_step / 2
    return best[1], best[2]


def _through_unsplit(layer_ms, in_b, out_b, chunk_ms: dict, stat, alpha: float, beta: float) -> tuple[float, float]:
    """Most plans on a real board are one slice on one device, and for that slice the
    profile holds a direct measurement: make the calibrated prediction of the unsplit
    model equal it, and within that constraint fit the other slices as well as possible
    (the direction of (alpha, beta) searched on a grid, its length by bisection). Where
    no (alpha, beta) >= 0 reaches it (the unsplit model measured slower than its layers
    summed), the unconstrained fit is kept."""
    L = len(layer_ms)
    if L < 2 or (0, L - 1) not in chunk_ms:
        return alpha, beta
    target = float(stat(chunk_ms[(0, L - 1)]))
    excess = float(layer_ms.sum()) - target
    if excess <= 0:
        return alpha, beta
    inner = float((in_b + out_b).sum() - in_b[0] - out_b[-1])
    loss = _fit_loss(layer_ms, in_b, out_b, chunk_ms, stat)

    def whole(al: float, be: float) -> float:
        return slice_prediction(layer_ms, in_b, out_b, al, be, 0, L - 1)

    best = None
    unit_a = excess / inner if inner > 0 else 0.0
    unit_b = excess / (2.0 * (L - 1))
    for theta in np.linspace(0.0, np.pi / 2, 33):
        da, db = np.cos(theta) * unit_a, np.sin(theta) * unit_b
        if da + db <= 0:
            continue
        # Along the ray the prediction is convex and piecewise linear in the length (each
        # layer's execution is clipped at 0 past its own breakpoint): its minimum is at a
        # breakpoint; if that reaches the target, the shortest length that does lies
        # between 0 (the layers summed, above the target) and it: bisect there.
        rate = da * (in_b + out_b) + 2.0 * db
        knots = np.sort(layer_ms[rate > 0] / rate[rate > 0])
        if knots.size == 0:
            continue
        values = [whole(x * da, x * db) for x in knots]
        best_k = int(np.argmin(values))
        if values[best_k] > target:
            continue
        lo, hi = 0.0, float(knots[best_k])
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if whole(mid * da, mid * db) <= target else (mid, hi)
        cand = (loss(hi * da, hi * db), hi * da, hi * db)
        if best is None or cand[0] < best[0]:
            best = cand
    return (best[1], best[2]) if best is not None else (alpha, beta)


def calibrate(layer_ms, in_b, out_b, chunk_ms: dict, stat=np.median) -> tuple[float, float, list[float]]:
    """(alpha ms/byte, beta ms, relative errors): the per-slice costs that make the
    predicted time of each measured slice (the unsplit model and its equal chunks) equal
    its measurement. Each slice a..b says
        sum_k T_k - measured = alpha * (sum_k (in_k + out_k) - in_a - out_b) + beta * 2 (b - a),
    solved by least squares in relative terms with alpha, beta >= 0, each slice weighted
    by its length (a plan has few slices), then constrained to predict the unsplit model
    exactly where it can (_through_unsplit)."""
    rows, rhs = [], []
    for (a, b), samples in chunk_ms.items():
        if b == a:
            continue
        meas = float(stat(samples))
        x = float((in_b[a:b + 1] + out_b[a:b + 1]).sum() - in_b[a] - out_b[b])
        w = np.sqrt((b - a + 1) / len(layer_ms))  # long slices weigh more: plans have few slices
        rows.append([w * x / meas, w * 2.0 * (b - a) / meas])
        rhs.append(w * (float(layer_ms[a:b + 1].sum()) - meas) / meas)
    alpha = beta = 0.0
    if rows:
        A, y = np.array(rows), np.array(rhs)
        scale = np.abs(A).max(axis=0)
        scale[scale == 0] = 1.0
        sol, *_ = np.linalg.lstsq(A / scale, y, rcond=None)
        sol = sol / scale
        if sol[0] < 0 or sol[1] < 0:  # the better one-parameter fit with the other at 0
            best = None
            for k in (0, 1):
                col = A[:, k]
                v = max(0.0, float(col @ y) / float(col @ col)) if col @ col > 0 else 0.0
                err = float(((col * v - y) ** 2).sum())
                if best is None or err < best[0]:
                    best = (err, k, v)
            sol = np.zeros(2)
            sol[best[1]] = best[2]
        alpha, beta = float(sol[0]), float(sol[1])
        alpha, beta = _refine(layer_ms, in_b, out_b, chunk_ms, stat, alpha, beta)
        alpha, beta = _through_unsplit(layer_ms, in_b, out_b, chunk_ms, stat, alpha, beta)
    errors = [
        (slice_prediction(layer_ms, in_b, out_b, alpha, beta, a, b) - float(stat(v))) / float(stat(v))
        for (a, b), v in chunk_ms.items()
    ]
    return alpha, beta, errors


def switch_extras(run, dst_src: tuple[str, str], stat) -> dict[int, list[float]]:
    """Per cut, per round: the extra ms of the two-slice run (layers before the cut on
    `src`, the rest on `dst`) over the same slices each on its own device, both runs of
    the same round (paired, so load that hits a whole round cancels). The two-slice run
    follows its own last slice, as a plan served back to back does, so the extra holds
    both what entering `dst` costs and what returning to `src` for the next inference
    costs: exactly what a two-slice plan pays per inference, and a pessimistic count for
    a plan that switches back and forth (each of its switches carries a return)."""
    src, dst = dst_src
    sw, own_a, own_b = run.switch_ms[(src, dst)], run.switch_ms[(src, src)], run.switch_ms[(dst, dst)]
    out = {}
    for c, smp in sw.items():
        n = min(len(smp), len(own_a[c]), len(own_b[c]))
        out[c] = [smp[r][0] + smp[r][1] - own_a[c][r][0] - own_b[c][r][1] for r in range(n)]
    return out


def fit_switch(sizes, extras_per_cut, stat) -> tuple[list[float], float, float, list[float]]:
    """(time_coeffs_ms [constant, per byte], fit error ms, uncertainty ms, per-cut
    estimates) of a device switch from its paired per-round extras at several cuts.

    Each cut's estimate is the profile's statistic of the paired extras (the median by
    default: one disturbed round moves it little, where a difference of two
    independently taken medians can land anywhere in the noise). The line is fitted by
    least squares with both coefficients >= 0; where the bound binds, the constant is
    raised until the mean residual is zero, so the fit never sits below the
    measurements on average (a noisy pair is not under-estimated). The uncertainty is
    what the profile cannot resolve: the fit's RMS residual and the standard error of
    the per-cut estimates (1.25 sigma / sqrt(n) for a median, sigma from the
    interquartile range), combined in quadrature."""
    x = np.asarray(sizes, dtype=float)
    est = np.array([float(stat(e)) for e in extras_per_cut])
    if len(set(x.tolist())) >= 2:
        A = np.column_stack([np.ones_like(x), x])
        sol, *_ = np.linalg.lstsq(A, est, rcond=None)
        if sol[1] < 0:
            sol = np.array([est.mean(), 0.0])
        if sol[0] < 0:
            slope = max(0.0, float(x @ est) / float(x @ x)) if float(x @ x) > 0 else 0.0
            sol = np.array([0.0, slope])
    else:
        sol = np.array([float(est.mean()), 0.0])
    sol = np.maximum(sol, 0.0)
    resid = est - (sol[0] + sol[1] * x)
    if resid.mean() > 0:
        sol[0] += float(resid.mean())
        resid = est - (sol[0] + sol[1] * x)
    se = []
    for e in extras_per_cut:
        e = np.asarray(e, dtype=float)
        q75, q25 = np.percentile(e, [75, 25]) if e.size else (0.0, 0.0)
        se.append(1.2533 * (q75 - q25) / 1.349 / np.sqrt(max(e.size, 1)))
    uncertainty = float(np.sqrt(np.mean(resid ** 2) + np.mean(np.square(se))))
    return [float(sol[0]), float(sol[1])], float(np.mean(np.abs(resid))), uncertainty, est.tolist()


def slice_uncertainty(errors) -> float:
    """A device's relative uncertainty of a slice's predicted time: the RMS relative
    error of the calibrated prediction over its measured slices."""
    e = np.asarray(errors, dtype=float)
    return float(np.sqrt(np.mean(e ** 2))) if e.size else 0.0
