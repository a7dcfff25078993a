"""Each MOSAIC estimator against its equation, and compilation against hand-worked numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from docs import platform_dict, profile_dict, with_change

from models.communication import LinearCommModel, PolynomialCommModel
from models.compile import compile_problem
from models.dvfs import PerformanceModel, PowerModel
from planner.core.errors import InputError
from planner.core.schema import ModelProfile, Platform


def compiled(platform=None, profile=None):
    return compile_problem(Platform.model_validate(platform or platform_dict()),
                           ModelProfile.model_validate(profile or profile_dict()))


def target(problem, device, freq):
    return next(i for i, t in enumerate(problem.targets) if t.device_id == device and t.freq_mhz == freq)


# ---------------------------------------------------------------- eq. 1-2
def test_linear_comm_fit_recovers_alpha_beta():
    sizes = np.array([1e3, 1e4, 1e5, 1e6, 4e6])
    m = LinearCommModel.fit(sizes, 2.5e-6 * sizes + 0.3)
    assert m.alpha_ms_per_byte == pytest.approx(2.5e-6) and m.beta_ms == pytest.approx(0.3)
    assert m.r2 == pytest.approx(1.0)
    assert m.predict_ms(2e6) == pytest.approx(5.3)


def test_linear_comm_fit_with_noise_is_least_squares():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5e6, 200)
    y = 1e-6 * x + 0.8 + rng.normal(0, 0.05, 200)
    m = LinearCommModel.fit(x, y)
    ref = np.polyfit(x, y, 1)
    assert m.alpha_ms_per_byte == pytest.approx(ref[0]) and m.beta_ms == pytest.approx(ref[1])
    assert 0.99 < m.r2 <= 1.0


def test_linear_comm_fit_needs_two_sizes():
    with pytest.raises(ValueError, match="two or more distinct"):
        LinearCommModel.fit([100, 100], [1.0, 1.1])


def test_linear_comm_never_negative_coefficients():
    m = LinearCommModel.fit([0, 1000, 2000], [0.0, 0.9, 2.1])  # OLS intercept would be < 0
    assert m.beta_ms >= 0 and m.alpha_ms_per_byte > 0


def test_polynomial_comm_fit_recovers_kang_memcpy_curve():
    x = np.linspace(1, 4000, 30)
    y = 1.06e-2 * x**2 + 2.75e-1 * x + 1.70
    m = PolynomialCommModel.fit(x, y, degree=2)
    assert m.coeffs_ms == pytest.approx((1.70, 2.75e-1, 1.06e-2), rel=1e-6)


# ---------------------------------------------------------------- eq. 3
def test_performance_model_exact_through_two_points():
    m = PerformanceModel.fit([500, 1000], [18.0, 10.0])
    # t = gamma/f + eps: 18 = g/500 + e, 10 = g/1000 + e -> g = 8000, e = 2
    assert m.gamma_ms_mhz == pytest.approx(8000) and m.epsilon_ms == pytest.approx(2)
    assert m.predict_ms(800) == pytest.approx(8000 / 800 + 2)


def test_performance_model_least_squares_through_more_points():
    f = np.array([400.0, 600, 800, 1000, 1200])
    m = PerformanceModel.fit(f, 5000 / f + 1.5)
    assert m.gamma_ms_mhz == pytest.approx(5000) and m.epsilon_ms == pytest.approx(1.5)


def test_performance_model_needs_two_frequencies():
    with pytest.raises(ValueError):
        PerformanceModel.fit([800, 800], [1.0, 1.0])


# ---------------------------------------------------------------- eq. 4-5
def test_power_model_scales_dynamic_power_by_v2f():
    m = PowerModel.fit(total_power_w=3.0, static_power_w=0.5, freq_mhz=2000, voltage_v=1.1)
    expected_dyn = 2.5 * (0.8**2 * 1000) / (1.1**2 * 2000)
    assert m.predict_w(1000, 0.8, 0.3) == pytest.approx(0.3 + expected_dyn)
    assert m.predict_w(2000, 1.1, 0.5) == pytest.approx(3.0)


# ---------------------------------------------------------------- compile
def test_compile_subtracts_communication_and_fits_dvfs():
    p = compiled()
    g800, g400, g200 = target(p, "gpu", 800), target(p, "gpu", 400), target(p, "gpu", 200)
    # comm = 0.5 + 0.001 * 100 = 0.6 each way
    assert p.comm_in_time_ms[0, g800] == pytest.approx(0.6) and p.comm_out_time_ms[0, g800] == pytest.approx(0.6)
    # exec at max = total - comm = 4.0; at 200 MHz = 12.0; eq. 3 -> gamma = 8*800*200/600, eps
    assert p.exec_time_ms[0, g800] == pytest.approx(4.0)
    assert p.exec_time_ms[0, g200] == pytest.approx(12.0)
    perf = PerformanceModel.fit([200, 800], [12.0, 4.0])
    assert p.exec_time_ms[0, g400] == pytest.approx(perf.predict_ms(400))
    # power: static 0.2, dynamic at max 2.8, scaled by V^2 f
    p400 = 0.2 + 2.8 * (0.8**2 * 400) / (1.0**2 * 800)
    assert p.exec_energy_mj[0, g400] == pytest.approx(p400 * perf.predict_ms(400))
    assert p.comm_in_energy_mj[0, g400] == pytest.approx(p400 * p.comm_in_time_ms[0, g400])


def test_compile_cpu_has_free_communication_and_measured_time():
    p = compiled()
    c1000 = target(p, "cpu", 1000)
    assert p.comm_in_time_ms[:, c1000].sum() == 0
    assert p.exec_time_ms[0, c1000] == pytest.approx(10.0)
    assert p.exec_energy_mj[0, c1000] == pytest.approx(2.1 * 10.0)


def test_compile_single_level_device_uses_energy_measurement():
    p = compiled()
    n = target(p, "npu", 960)
    assert p.exec_time_ms[0, n] == pytest.approx(1.0)  # 3.4 total - 2 x 1.2 comm
    assert p.exec_energy_mj[0, n] == pytest.approx(1.5 * 1.0)


def test_unsupported_op_and_memory_limit_make_targets_infeasible():
    p = compiled()
    n = target(p, "npu", 960)
    assert not math.isfinite(p.exec_time_ms[3, n])  # softmax unsupported on the NPU
    assert p.memory_limit_bytes[n] == 1000
    assert p.feasible[0, n] and not p.feasible[3, n]


def test_one_frequency_only_leaves_other_levels_out_with_a_note():
    prof = profile_dict()
    prof["layers"][0]["measurements"] = [m for m in prof["layers"][0]["measurements"] if m.get("freq_mhz") != 200]
    p = compiled(profile=prof)
    assert math.isfinite(p.exec_time_ms[0, target(p, "gpu", 800)])
    assert not math.isfinite(p.exec_time_ms[0, target(p, "gpu", 400)])
    assert any("second frequency" in n for n in p.notes)


def test_communication_exceeding_measurement_is_clamped_and_noted():
    prof = with_change(profile_dict(), "layers.0.measurements.3.time_ms", 1.0)  # < 1.2 of comm
    p = compiled(profile=prof)
    assert p.exec_time_ms[0, target(p, "gpu", 800)] == pytest.approx(0.0, abs=1e-9)
    assert any("exceeds the measured" in n for n in p.profile_notes)


def test_sampled_communication_is_fitted():
    plat = platform_dict()
    plat["devices"][1]["communication"] = {"kind": "samples", "points": [
        {"bytes": b, "time_ms": 0.001 * b + 0.5} for b in (0, 1000, 5000, 20000)]}
    p = compiled(platform=plat)
    assert p.comm_in_time_ms[0, target(p, "gpu", 800)] == pytest.approx(0.6)


def test_pair_transitions_compile_to_adjacent_costs():
    plat = platform_dict()
    plat["transitions"] = [{"from_device": "cpu", "to_device": "gpu", "time_coeffs_ms": [1.0, 0.01],
                            "energy_coeffs_mj": [2.0]}]
    p = compiled(platform=plat)
    c, g = target(p, "cpu", 1000), target(p, "gpu", 800)
    assert p.pair_time_ms.shape == (3, p.n_targets, p.n_targets)
    assert p.pair_time_ms[0, c, g] == pytest.approx(1.0 + 0.01 * 100)
    assert p.pair_energy_mj[0, c, g] == pytest.approx(2.0)
    assert p.pair_time_ms[0, g, c] == 0.0 and p.pair_time_ms[0, c, c] == 0.0


@pytest.mark.parametrize(
    "change, path_fragment",
    [
        (("layers.0.measurements.0.device", "tpu"), "layers[0].measurements[0].device"),
        (("layers.0.measurements.0.freq_mhz", 750), "layers[0].measurements[0].freq_mhz"),
        (("layers.0.measurements.0.freq_mhz", None), "layers[0].measurements[0].freq_mhz"),
    ],
)
def test_compile_refuses_inconsistent_measurements(change, path_fragment):
    prof = with_change(profile_dict(), *change)
    with pytest.raises(InputError) as exc:
        compiled(profile=prof)
    assert path_fragment in str(exc.value)


def test_layer_no_device_can_run_is_refused():
    prof = profile_dict()
    prof["layers"][3]["measurements"] = []
    with pytest.raises(InputError, match=r"layers\[3\]: no device can run layer 'l4'"):
        compiled(profile=prof)


def test_layer_too_big_for_every_device_that_runs_it():
    plat = platform_dict()
    prof = profile_dict()
    prof["layers"][0]["measurements"] = [m for m in prof["layers"][0]["measurements"] if m["device"] == "npu"]
    prof["layers"][0]["weight_bytes"] = 5000
    with pytest.raises(InputError, match=r"layers\[0\].memory_bytes"):
        compiled(platform=plat, profile=prof)
