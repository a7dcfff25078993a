"""No silent assumptions in scheduling (issue 15 item 3, issue 13 item 4): a device pair
without a transition entry, a PE lost for want of a measurement, a profile made for
another platform, measurements a solver family cannot use; and `planner validate`
speaks for every family through the functions scheduling uses, so the two never
disagree on what is runnable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.compile import compile_problem
from models.multiapp import compile_schedule, schedule_usability
from planner.core.errors import InputError
from planner.core.io import load
from planner.core.schema import ModelProfile, Platform, ScheduleRequest
from planner.scheduling import make_schedule
from tests.support.cli import run

S9 = "profiles/platforms/galaxy_s9.json"
HIKEY = "profiles/platforms/hikey970.json"
SQ, V1 = "profiles/models/squeezenet_s9.json", "profiles/models/mobilenet_v1_s9.json"


def plat(pairs=(("cpu", "cpu"), ("cpu", "gpu"), ("gpu", "cpu")), default=None, gpu_freq=600.0) -> Platform:
    doc = {
        "name": "two",
        "devices": [
            {"id": "cpu", "kind": "cpu", "cores": 2, "active_core_freq_mhz": [2000.0, 1800.0],
             "dvfs_levels": [{"freq_mhz": 2000.0, "voltage_v": 1.0}, {"freq_mhz": 1800.0, "voltage_v": 0.95}]},
            {"id": "gpu", "kind": "gpu", "dvfs_levels": [{"freq_mhz": gpu_freq}]},
        ],
        "transitions": [{"from_device": a, "to_device": b, "time_coeffs_ms": [0.5], "energy_coeffs_mj": [0.1]}
                        for a, b in pairs],
    }
    if default is not None:
        doc["default_transition"] = default
    return Platform.model_validate(doc)


def prof(name="A", n=4, missing_1core=(), gpu=True, gpu_freq=None) -> ModelProfile:
    layers = []
    for i in range(n):
        ms = [{"device": "cpu", "cores": 2, "freq_mhz": 1800.0, "time_ms": 2.0, "power_w": 2.0}]
        if i not in missing_1core:
            ms.append({"device": "cpu", "cores": 1, "freq_mhz": 2000.0, "time_ms": 3.0, "power_w": 1.0})
        if gpu:
            g = {"device": "gpu", "time_ms": 1.5, "power_w": 3.0}
            if gpu_freq is not None:
                g["freq_mhz"] = gpu_freq
            ms.append(g)
        layers.append({"id": f"l{i}", "op_type": "conv", "input_bytes": 1000, "output_bytes": 4000, "measurements": ms})
    return ModelProfile.model_validate({"name": name, "layers": layers})


def req(*names, **kw) -> ScheduleRequest:
    return ScheduleRequest.model_validate(
        {"apps": [{"profile": n, "period_ms": 100.0, "priority": k} for k, n in enumerate(names)], **kw})


# --------------------------------------------------------------------------- transition pairs


def test_a_missing_transition_pair_is_an_error_naming_the_pair():
    with pytest.raises(InputError) as err:
        compile_schedule(plat(pairs=[("cpu", "cpu"), ("cpu", "gpu")]), [prof()], req("A"))
    issues = err.value.issues
    assert [i.path for i in issues] == ["transitions"]
    assert "no transition gpu -> cpu" in issues[0].reason and "default_transition" in issues[0].reason
    # the CPU cluster's own logical PEs need the cpu -> cpu pair too
    with pytest.raises(InputError, match="no transition cpu -> cpu"):
        compile_schedule(plat(pairs=[("cpu", "gpu"), ("gpu", "cpu")]), [prof()], req("A"))


def test_a_pair_the_mapping_space_never_uses_is_not_needed():
    # only the CPU allowed: no CPU<->GPU crossing can happen
    sp = compile_schedule(plat(pairs=[("cpu", "cpu")]), [prof()], req("A", devices=["cpu"]))
    assert sp.configs
    # a network of one layer has no edge, so no transfer at all
    assert compile_schedule(plat(pairs=[]), [prof(n=1)], req("A")).configs


def test_a_declared_default_transition_prices_the_unlisted_pairs():
    p = plat(pairs=[("cpu", "cpu"), ("cpu", "gpu")], default={"time_coeffs_ms": [0.25], "energy_coeffs_mj": [0.05]})
    mp = compile_schedule(p, [prof()], req("A", cpu_partitions={"cpu": [[2]]})).configs[0]
    cpu0, gpu = 0, 1
    app = mp.apps[0]
    assert np.allclose(app.edge_time_ms[:, gpu, cpu0], 0.25) and np.allclose(app.edge_energy_mj[:, gpu, cpu0], 0.05)
    assert np.allclose(app.edge_time_ms[:, cpu0, gpu], 0.5)  # a listed pair keeps its own cost


# --------------------------------------------------------------------------- measurements


def test_a_pe_lost_for_want_of_a_measurement_is_noted_with_the_mappings_removed():
    p, a = plat(), prof(missing_1core=(1,))
    sched = make_schedule(p, [a], req("A", solver="exhaustive", cpu_partitions={"cpu": [[1, 1]]}))
    note = next(w for w in sched.warnings if "mappings removed" in w)
    # (1,1): PEs cpu0, cpu1, gpu; l1 has no 1-core run, so it keeps only the GPU: 3^4 = 81 -> 3^3 = 27
    assert "(l1)" in note and "1-core measurement" in note and "cpu0" in note and "cpu1" in note
    assert "54 of 81 mappings removed (27 remain)" in note
    # nothing is said where nothing is missing
    assert not any("mappings removed" in w for w in make_schedule(p, [prof()], req("A", solver="exhaustive")).warnings)


def test_an_s9_profile_on_the_hikey970_is_refused_naming_what_is_missing(capsys):
    hikey, sq = load(Platform, HIKEY, "platform"), load(ModelProfile, SQ, "profile")
    with pytest.raises(InputError) as err:
        compile_schedule(hikey, [sq], req("SqueezeNet"))
    reasons = " | ".join(i.reason for i in err.value.issues)
    assert err.value.issues[0].path == "apps[0].profile"
    assert "device(s) 'cpu' (156 measurements) that platform 'hikey970' lacks" in reasons
    assert "without `freq_mhz`" in reasons and "8 DVFS levels" in reasons
    code, out, errtxt = run(capsys, "schedule", "--platform", HIKEY, "--app", f"{SQ}:33:0")
    assert code == 2 and "that platform 'hikey970' lacks" in errtxt and "Traceback" not in errtxt


def test_a_frequency_the_platform_lacks_is_refused():
    with pytest.raises(InputError, match=r"measures 'gpu' at 999 MHz, not a DVFS level of platform 'two''s 'gpu' \(600 MHz\)"):
        compile_schedule(plat(), [prof(gpu_freq=999.0)], req("A"))
    assert compile_schedule(plat(), [prof(gpu_freq=600.0)], req("A")).configs


def test_solve_states_the_cpu_measurements_it_cannot_use(capsys):
    s9, v1 = load(Platform, S9, "platform"), load(ModelProfile, V1, "profile")
    notes = compile_problem(s9, v1).notes
    assert any("120 measurement(s) on 'cpu' carry `cores`" in n and "chain plans cannot use them" in n for n in notes)
    code, out, _ = run(capsys, "solve", "--platform", S9, "--profile", V1)
    assert code == 0 and "warning: 120 measurement(s) on 'cpu' carry `cores`" in out


def test_typed_measurements_are_stated_when_scheduling():
    a = prof()
    doc = a.model_dump(mode="json", exclude_none=True)
    doc["layers"][0]["measurements"].append({"device": "gpu", "time_ms": 1.0, "power_w": 2.0, "dtype": "f16"})
    sp = compile_schedule(plat(), [ModelProfile.model_validate(doc)], req("A"))
    assert any("1 measurement(s) of profile 'A' on 'gpu' carry a `dtype`" in n for n in sp.notes)


# --------------------------------------------------------------------------- validate


def test_validate_understands_per_core_measurements_on_the_shipped_s9_profiles(capsys):
    code, out, _ = run(capsys, "validate", "--platform", S9, "--profile", SQ)
    assert code == 0 and out.strip().endswith("ok")
    sched = out[out.index("schedule solvers"):out.index("mulayer")]
    for k in (1, 2, 3, 4):
        assert f"cpu {k} core{'s' if k > 1 else ''}" in sched
    assert "runs   39/39 layers" in sched and "npu          runs   39/39 layers; 39 estimated" in sched
    assert "5 CPU configuration(s)" in sched and "auto runs ga" in sched
    plan = out[out.index("plan solvers"):out.index("schedule solvers")]
    assert "cpu      runs    0/39 layers" in plan and "warning: 156 measurement(s) on 'cpu' carry `cores`" in plan
    assert "mulayer (" in out and "asymo:" in out and "usable by: plan, schedule" in out


def test_validate_accepts_what_schedule_accepts(tmp_path, capsys):
    """Only per-core CPU runs: no chain plan can use it, scheduling can; validate says both."""
    p, a = plat(), prof(gpu=False)
    (tmp_path / "p.json").write_text(p.model_dump_json(exclude_none=True))
    (tmp_path / "a.json").write_text(a.model_dump_json(exclude_none=True))
    code, out, err = run(capsys, "validate", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "a.json"))
    assert code == 0, err
    assert "cannot use this pair: layers[0]: no device can run layer 'l0'" in out
    assert "usable by: schedule" in out
    code, out, err = run(capsys, "schedule", "--platform", str(tmp_path / "p.json"), "--app", f"{tmp_path / 'a.json'}:100:0")
    assert code == 0, err


def test_validate_refuses_what_schedule_refuses(tmp_path, capsys):
    p = plat(pairs=[("cpu", "cpu"), ("cpu", "gpu")])
    (tmp_path / "p.json").write_text(p.model_dump_json(exclude_none=True))
    (tmp_path / "a.json").write_text(prof().model_dump_json(exclude_none=True))
    code, out, _ = run(capsys, "validate", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "a.json"))
    sched = out[out.index("schedule solvers"):out.index("mulayer")]
    assert "cannot use this pair: transitions: no transition gpu -> cpu" in sched
    code, _, err = run(capsys, "schedule", "--platform", str(tmp_path / "p.json"), "--app", f"{tmp_path / 'a.json'}:100:0")
    assert code == 2 and "no transition gpu -> cpu" in err


@pytest.mark.parametrize("seed", range(6))
def test_validate_counts_are_the_compiled_problem_s(seed):
    """Random gaps in the measurements: validate's per-(device, cores) runnable counts
    equal what the compiled schedule problem lets each logical PE run."""
    rng = np.random.default_rng(seed)
    doc = prof(n=6).model_dump(mode="json", exclude_none=True)
    for layer in doc["layers"]:
        ms = layer["measurements"]  # the 2-core run stays: every configuration keeps a PE for each layer
        layer["measurements"] = ms[:1] + [m for m in ms[1:] if rng.random() < 0.6]
    a = ModelProfile.model_validate(doc)
    sp, rows = schedule_usability(plat(), a)
    counts = {(d, k): runs for d, k, runs, _, _ in rows}
    for mp in sp.configs:
        for p, pe in enumerate(mp.pes):
            key = (pe.device_id, pe.cores if pe.is_cpu else None)
            assert int(np.isfinite(mp.apps[0].exec_time_ms[:, p]).sum()) == counts[key]
    assert json.dumps(rows)  # plain numbers
