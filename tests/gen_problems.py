"""Small random Problems for property tests of exact solvers (import as
`from gen_problems import problems`). Costs are drawn from a few integers so ties are
common; some (layer, target) pairs are infeasible; memory limits and device-pair
transition costs appear on some instances."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.support.synthetic import make_problem, random_problem  # noqa: F401 - re-exported for tests


@st.composite
def problems(draw, max_layers: int = 6, max_targets: int = 3, allow_pairs: bool = True) -> Problem:
    L = draw(st.integers(1, max_layers))
    T = draw(st.integers(1, max_targets))
    small = st.integers(0, 5).map(float)
    ex = np.array(draw(st.lists(st.lists(small, min_size=T, max_size=T), min_size=L, max_size=L)))
    en = np.array(draw(st.lists(st.lists(small, min_size=T, max_size=T), min_size=L, max_size=L)))
    infeasible = np.array(draw(st.lists(st.lists(st.booleans(), min_size=T, max_size=T), min_size=L, max_size=L)))
    if draw(st.booleans()):
        ex = np.where(infeasible & (np.arange(T)[None, :] > 0), np.inf, ex)  # keep target 0 whole sometimes
    else:
        ex = np.where(infeasible, np.inf, ex)  # may be infeasible outright
    cin = np.array(draw(st.lists(st.lists(small, min_size=T, max_size=T), min_size=L, max_size=L)))
    cout = np.array(draw(st.lists(st.lists(small, min_size=T, max_size=T), min_size=L, max_size=L)))
    mem = np.array(draw(st.lists(st.integers(0, 4), min_size=L, max_size=L)))
    limits = np.array(draw(st.lists(st.one_of(st.just(np.inf), st.integers(0, 8).map(float)), min_size=T, max_size=T)))
    pair_t = pair_e = None
    if allow_pairs and L > 1 and draw(st.booleans()):
        vals = draw(st.lists(small, min_size=(L - 1) * T * T, max_size=(L - 1) * T * T))
        pair_t = np.array(vals).reshape(L - 1, T, T)
        pair_e = pair_t[:, ::-1, :].copy()
    levels = draw(st.sampled_from([lv for lv in (1, 2, 3) if T % lv == 0]))
    return make_problem(
        ex,
        exec_energy_mj=en,
        comm_in_ms=cin,
        comm_out_ms=cout,
        memory_bytes=mem,
        memory_limit_bytes=limits,
        pair_time_ms=pair_t,
        pair_energy_mj=pair_e,
        levels_per_device=levels,
    )
