"""Multi-network model (Kang et al.): logical PEs, DVFS calibration, PE-pair transfers,
the estimated NPU, and the documents' errors naming the field."""

import json
import math

import numpy as np
import pytest
from pydantic import ValidationError

from models.multiapp import compile_schedule, partitions
from planner.core.errors import InfeasibleError, InputError
from planner.core.io import load
from planner.core.schema import ModelProfile, Platform, ScheduleRequest
from profiles import generate_s9

S9 = "profiles/platforms/galaxy_s9.json"


@pytest.fixture(scope="module")
def s9():
    plat = load(Platform, S9, "platform")
    sq = load(ModelProfile, "profiles/models/squeezenet_s9.json", "profile")
    return plat, sq


def req(apps, **kw):
    return ScheduleRequest.model_validate({"apps": apps, **kw})


def test_partitions_are_the_five_configurations_of_fig1():
    assert partitions(4) == [(4,), (3, 1), (2, 2), (2, 1, 1), (1, 1, 1, 1)]
    assert partitions(1) == [(1,)]


def test_logical_pes_per_configuration(s9):
    plat, sq = s9
    sp = compile_schedule(plat, [sq], req([{"profile": "SqueezeNet", "period_ms": 100, "priority": 0}]))
    assert [mp.config_dict()["cpu"] for mp in sp.configs] == [[4], [3, 1], [2, 2], [2, 1, 1], [1, 1, 1, 1]]
    mp = sp.configs[3]
    assert [pe.name for pe in mp.pes] == ["cpu0", "cpu1", "cpu2", "gpu", "npu"]
    assert list(mp.pe_cores) == [2, 1, 1, 1, 1]
    assert list(mp.pe_preemptive) == [True, True, True, False, False]
    assert mp.total_cpu_cores == 4


def test_dvfs_calibration_scales_to_the_all_cores_busy_frequency(s9):
    plat, sq = s9
    r = req([{"profile": "SqueezeNet", "period_ms": 100, "priority": 0}], devices=["cpu"], cpu_partitions={"cpu": [[2, 1, 1]]})
    cal = compile_schedule(plat, [sq], r).configs[0].apps[0]
    raw = compile_schedule(plat, [sq], r.model_copy(update={"dvfs_calibration": False})).configs[0].apps[0]
    layer = sq.layers[0]
    m2 = next(m for m in layer.measurements if m.cores == 2)
    m1 = next(m for m in layer.measurements if m.cores == 1)
    assert m2.freq_mhz == 2314 and m1.freq_mhz == 2704
    assert cal.exec_time_ms[0, 0] == pytest.approx(m2.time_ms * 2314 / 1794)  # IV.A: x 2.31 / 1.79
    assert cal.exec_time_ms[0, 1] == pytest.approx(m1.time_ms * 2704 / 1794)
    assert raw.exec_time_ms[0, 0] == pytest.approx(m2.time_ms)
    assert cal.exec_energy_mj[0, 0] == pytest.approx(cal.exec_time_ms[0, 0] * 3.5 * 2 / 4)


def test_npu_is_estimated_from_the_quad_core_cpu(s9):
    plat, sq = s9
    r = req([{"profile": "SqueezeNet", "period_ms": 100, "priority": 0}], cpu_partitions={"cpu": [[4]]})
    app = compile_schedule(plat, [sq], r).configs[0].apps[0]
    cpu4, npu = 0, 2
    assert np.allclose(app.exec_time_ms[:, npu], app.exec_time_ms[:, cpu4] / 6.5)
    assert np.allclose(app.exec_energy_mj[:, npu], app.exec_time_ms[:, npu] * 2.0)


def test_transfers_by_pe_pair_follow_the_fitted_polynomials(s9):
    plat, sq = s9
    r = req([{"profile": "SqueezeNet", "period_ms": 100, "priority": 0}], devices=["cpu", "gpu"], cpu_partitions={"cpu": [[2, 2]]})
    app = compile_schedule(plat, [sq], r).configs[0].apps[0]
    e = 0  # conv1 -> pool1
    mb = sq.layers[0].output_bytes / 1e6
    memcpy_us = 1.70 + 0.275 * mb + 1.06e-2 * mb**2
    map_us, unmap_us = 569.25 + 21.75 * mb, 526.39 + 9.97 * mb
    cpu0, cpu1, gpu = 0, 1, 2
    assert app.edge_time_ms[e, cpu0, cpu0] == 0
    assert app.edge_time_ms[e, cpu0, cpu1] == pytest.approx(memcpy_us / 1e3)
    assert app.edge_time_ms[e, cpu0, gpu] == pytest.approx((map_us + memcpy_us + unmap_us) / 1e3)
    assert app.edge_time_ms[e, gpu, cpu1] == pytest.approx((map_us + memcpy_us) / 1e3)


def test_fire_modules_are_dag_branches(s9):
    _, sq = s9
    ids = [layer.id for layer in sq.layers]
    concat = sq.layers[ids.index("fire2_concat")]
    assert concat.predecessors == ["fire2_expand1x1", "fire2_expand3x3"]
    assert sq.layers[ids.index("fire2_expand3x3")].predecessors == ["fire2_squeeze"]
    v2 = load(ModelProfile, "profiles/models/mobilenet_v2_s9.json", "profile")
    adds = [layer for layer in v2.layers if layer.op_type == "add"]
    assert len(adds) == 10 and all(len(a.predecessors) == 2 for a in adds)


def test_generator_is_deterministic_and_marks_generated_numbers():
    assert json.loads(open(S9).read()) == json.loads(json.dumps(generate_s9.platform_doc()))
    for k, (stem, display, build) in enumerate(generate_s9.NETWORKS):
        doc = generate_s9.profile_doc(stem, display, build(), np.random.default_rng([generate_s9.SEED, k]))
        assert json.loads(open(f"profiles/models/{stem}.json").read()) == json.loads(json.dumps(doc))
        assert "GENERATED" in doc["source"]
    assert "GENERATED" in generate_s9.platform_doc()["source"]


@pytest.mark.parametrize(
    "change, path",
    [
        ({"apps": [{"profile": "Nope", "period_ms": 10, "priority": 0}]}, "apps[0].profile"),
        ({"devices": ["tpu"]}, "devices[0]"),
        ({"cpu_partitions": {"cpu": [[2, 1]]}}, "cpu_partitions.cpu[0]"),
        ({"cpu_partitions": {"gpu": [[1]]}}, "cpu_partitions.gpu"),
    ],
)
def test_compile_errors_name_the_field(s9, change, path):
    plat, sq = s9
    data = {"apps": [{"profile": "SqueezeNet", "period_ms": 10, "priority": 0}], **change}
    with pytest.raises(InputError) as err:
        compile_schedule(plat, [sq], ScheduleRequest.model_validate(data))
    assert err.value.issues[0].path == path


def test_no_pe_can_run_a_layer_is_infeasible(s9):
    plat, sq = s9
    bare = sq.model_copy(update={"layers": [sq.layers[0].model_copy(update={"measurements": [
        m for m in sq.layers[0].measurements if m.device == "gpu"]})] + list(sq.layers[1:])})
    with pytest.raises(InfeasibleError, match="conv1"):
        compile_schedule(plat, [bare], req([{"profile": "SqueezeNet", "period_ms": 10, "priority": 0}], devices=["cpu"]))


@pytest.mark.parametrize(
    "data, loc",
    [
        ({"apps": [{"profile": "A", "period_ms": 1, "priority": 0}, {"profile": "A", "period_ms": 2, "priority": 1}]},
         ("apps", 1, "name")),
        ({"apps": [{"profile": "A", "period_ms": 1, "priority": 0}, {"profile": "B", "period_ms": 2, "priority": 0}]},
         ("apps", 1, "priority")),
        ({"apps": [{"profile": "A", "period_ms": 1, "priority": 0}, {"profile": "B", "period_ms": 2, "priority": 1}],
          "mode": "throughput"}, ("mode",)),
        ({"apps": [{"profile": "A", "period_ms": -1, "priority": 0}]}, ("apps", 0, "period_ms")),
        ({"apps": [{"profile": "A", "period_ms": 1, "priority": 0}], "cpu_utilisation_cap": 1.5}, ("cpu_utilisation_cap",)),
    ],
)
def test_request_errors_name_the_field(data, loc):
    with pytest.raises(ValidationError) as err:
        ScheduleRequest.model_validate(data)
    assert err.value.errors()[0]["loc"] == loc


def test_platform_checks_cluster_fields():
    base = json.loads(open(S9).read())
    bad = json.loads(json.dumps(base))
    bad["devices"][0]["active_core_freq_mhz"] = [2704.0, 1794.0]
    with pytest.raises(ValidationError) as err:
        Platform.model_validate(bad)
    assert err.value.errors()[0]["loc"] == ("devices", 0, "active_core_freq_mhz")
    bad = json.loads(json.dumps(base))
    bad["devices"][2]["estimate"]["reference_device"] = "dsp"
    with pytest.raises(ValidationError) as err:
        Platform.model_validate(bad)
    assert err.value.errors()[0]["loc"] == ("devices", 2, "estimate", "reference_device")
    assert math.isclose(Platform.model_validate(base).devices[0].active_core_freq_mhz[-1], 1794.0)
