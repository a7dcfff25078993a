"""Invalid input is refused with the JSON path and the reason."""

from __future__ import annotations

import json
import math

import pytest
from docs import DELETE, platform_dict, profile_dict, with_change

from planner.core.errors import InfeasibleError, InputError
from planner.core.io import parse
from planner.plan import make_plan
from planner.core.schema import DOCUMENTS, ModelProfile, PlanRequest, Platform


def refused(model, doc) -> str:
    with pytest.raises(InputError) as exc:
        parse(model, doc)
    return str(exc.value)


def test_valid_documents_parse():
    Platform.model_validate(platform_dict())
    ModelProfile.model_validate(profile_dict())


@pytest.mark.parametrize(
    "path, value, where, why",
    [
        ("layers.0.measurements.0.time_ms", math.nan, "layers[0].measurements[0].time_ms", "finite"),
        ("layers.0.measurements.0.time_ms", math.inf, "layers[0].measurements[0].time_ms", "finite"),
        ("layers.0.measurements.0.time_ms", -1.0, "layers[0].measurements[0].time_ms", "greater than 0"),
        ("layers.0.measurements.0.power_w", -0.5, "layers[0].measurements[0].power_w", "greater than or equal to 0"),
        ("layers.1.input_bytes", -5, "layers[1].input_bytes", "greater than or equal to 0"),
        ("layers.1.id", "l1", "layers[1].id", "duplicate layer id 'l1'"),
        ("layers.2.predecessors", ["nope"], "layers[2].predecessors[0]", "unknown layer 'nope'"),
        ("layers.0.measurements.0.energy_mj", 99.0, "layers[0].measurements[0].energy_mj", "disagrees"),
        ("layers.0.op_typo", "conv", "layers[0].op_typo", "Extra inputs are not permitted"),
        ("layers", [], "layers", "at least 1"),
    ],
)
def test_profile_rejections(path, value, where, why):
    msg = refused(ModelProfile, with_change(profile_dict(), path, value))
    assert where in msg and why in msg, msg


def test_time_only_profile_plans_latency_and_refuses_energy():
    """A measurement without power_w/energy_mj is time-only (no power source): latency
    plans report energy as unknown, energy objectives and caps are refused with the reason."""
    doc = profile_dict()
    for layer in doc["layers"]:
        for m in layer["measurements"]:
            m.pop("power_w", None)
            m.pop("energy_mj", None)
    doc["energy_source"] = "none: no power sensor"
    prof = ModelProfile.model_validate(doc)
    plat = Platform.model_validate(platform_dict())
    plan = make_plan(plat, prof, PlanRequest())
    assert plan.metrics.energy_mj is None and all(s.energy_mj is None for s in plan.slices)
    assert "null" in plan.model_dump_json() and "NaN" not in plan.model_dump_json()
    for request in (PlanRequest(objective="energy"), PlanRequest(solver="pareto", constraints={"max_energy_mj": 5.0})):
        with pytest.raises(InputError) as exc:
            make_plan(plat, prof, request)
        assert "no energy data" in str(exc.value) and "none: no power sensor" in str(exc.value), exc.value


def test_energy_data_is_checked_per_profile_object():
    """Whether a profile has energy data is worked out once per parsed (immutable)
    profile object: alternating a time-only and a measured profile, each answers as its
    own, also once the first objects are gone and new ones take their place."""
    doc = profile_dict()
    for layer in doc["layers"]:
        for m in layer["measurements"]:
            m.pop("power_w", None)
            m.pop("energy_mj", None)
    plat = Platform.model_validate(platform_dict())
    for _ in range(3):
        time_only, measured = ModelProfile.model_validate(doc), ModelProfile.model_validate(profile_dict())
        for _ in range(2):
            with pytest.raises(InputError, match="no energy data"):
                make_plan(plat, time_only, PlanRequest(objective="energy"))
            assert make_plan(plat, measured, PlanRequest(objective="energy")).metrics.energy_mj is not None
        del time_only, measured


def test_cycle_is_named():
    doc = profile_dict()
    doc["layers"][0]["predecessors"] = ["l3"]
    doc["layers"][1]["predecessors"] = ["l1"]
    doc["layers"][2]["predecessors"] = ["l2"]
    msg = refused(ModelProfile, doc)
    assert "cycle" in msg and "l1" in msg and "l3" in msg, msg


def test_out_of_order_layers_are_named():
    doc = with_change(profile_dict(), "layers.1.predecessors", ["l3"])
    doc["layers"][2]["predecessors"] = ["l1"]
    msg = refused(ModelProfile, doc)
    assert "layers[1].predecessors[0]" in msg and "listed after" in msg, msg


def test_chain_is_default_and_dag_is_kept():
    doc = profile_dict()
    doc["layers"][2]["predecessors"] = ["l1"]
    doc["layers"][3]["predecessors"] = ["l2", "l3"]
    prof = ModelProfile.model_validate(doc)
    assert prof.predecessor_indices() == [[], [0], [0], [1, 2]]


@pytest.mark.parametrize(
    "path, value, where, why",
    [
        ("devices.0.dvfs_levels", [], "devices[0].dvfs_levels", "at least one DVFS level"),
        ("devices.0.dvfs_levels.0.voltage_v", None, "devices[0].dvfs_levels[0].voltage_v", "required"),
        ("devices.0.dvfs_levels.0.freq_mhz", 0, "devices[0].dvfs_levels[0].freq_mhz", "greater than 0"),
        ("devices.0.dvfs_levels.1.freq_mhz", 500, "devices[0].dvfs_levels[1].freq_mhz", "duplicate frequency"),
        ("devices.1.id", "cpu", "devices[1].id", "duplicate device id 'cpu'"),
        ("devices.2.kind", "fpga", "devices[2].kind", "Input should be"),
        ("devices.2.memory_limit_bytes", 0, "devices[2].memory_limit_bytes", "greater than 0"),
        ("devices.1.static_power_w", -1, "devices[1].static_power_w", "greater than or equal to 0"),
        ("devices.1.communication.levels.0.freq_mhz", 300, "devices[1].communication.levels[0].freq_mhz", "not a DVFS level"),
        ("devices.1.communication.kind", "magic", "devices[1].communication", "does not match any of the expected tags"),
        ("fallback_order", ["npu", "dsp"], "fallback_order[1]", "unknown device 'dsp'"),
        ("devices.1.id", "bad id!", "devices[1].id", "pattern"),
    ],
)
def test_platform_rejections(path, value, where, why):
    msg = refused(Platform, with_change(platform_dict(), path, value))
    assert where in msg and why in msg, msg


def test_request_rejections():
    msg = refused(PlanRequest, {"objective": "throughput"})
    assert "objective" in msg
    msg = refused(PlanRequest, {"constraints": {"max_energy_mj": -3}})
    assert "constraints.max_energy_mj" in msg
    msg = refused(PlanRequest, {"time_limit_s": 0})
    assert "time_limit_s" in msg


def test_unknown_allowed_device_is_named():
    plat, prof = Platform.model_validate(platform_dict()), ModelProfile.model_validate(profile_dict())
    with pytest.raises(InputError, match=r"constraints.devices\[1\]: unknown device 'dsp'"):
        make_plan(plat, prof, PlanRequest(constraints={"devices": ["npu", "dsp"]}))


def test_request_no_plan_can_satisfy():
    plat, prof = Platform.model_validate(platform_dict()), ModelProfile.model_validate(profile_dict())
    with pytest.raises(InfeasibleError, match="layer 'l4' \\(op 'softmax'\\) cannot run on any allowed device"):
        make_plan(plat, prof, PlanRequest(constraints={"devices": ["npu"]}))


def test_memory_limit_can_make_a_device_restricted_request_infeasible():
    plat = platform_dict()
    plat["devices"][2]["unsupported_ops"] = []
    prof = profile_dict()
    prof["layers"][3]["measurements"].append({"device": "npu", "time_ms": 3.0, "power_w": 1.0})
    prof["layers"][3]["weight_bytes"] = 2000  # over the NPU's 1000-byte slice limit
    with pytest.raises(InfeasibleError):
        make_plan(Platform.model_validate(plat), ModelProfile.model_validate(prof),
                  PlanRequest(constraints={"devices": ["npu"]}))


def test_json_schemas_export():
    for name, model in DOCUMENTS.items():
        schema = model.model_json_schema()
        json.dumps(schema)
        assert schema["type"] == "object", name
    assert "dvfs_levels" in json.dumps(Platform.model_json_schema())
