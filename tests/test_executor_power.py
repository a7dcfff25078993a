"""Energy comes only from a power source: the readers integrate what they read, and a
profile measured with one carries energy that an energy plan can use."""

from __future__ import annotations

import os
import time

import onnx
import pytest

from executor.power import CsvMeter, RaplReader, detect
from executor.profiler import profile_model
from executor.runtime import parse_devices
from executor.slicing import layers, load_model, materialise
from planner_cli.commands.profile import build_documents
from planner.core.schema import ModelProfile, PlanRequest, Platform
from planner.plan import make_plan

SQUEEZE = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_squeezenet.onnx")


def test_rapl_counter_wraps(tmp_path):
    (tmp_path / "max_energy_range_uj").write_text("1000\n")
    (tmp_path / "energy_uj").write_text("900\n")
    r = RaplReader(str(tmp_path))
    assert r.energy_mj() == 0.0
    (tmp_path / "energy_uj").write_text("100\n")  # wrapped past 1000
    assert r.energy_mj() == pytest.approx(0.201)  # 100 uJ to the top, 1 to wrap, 100 after: 201 uJ
    assert r.name.startswith("rapl:")


def test_csv_meter_integrates_power_up_to_now(tmp_path):
    now = time.time()
    path = tmp_path / "meter.csv"
    path.write_text("unix_time_s,power_w\n" + "".join(f"{now - 10 + i},{2.0}\n" for i in range(11)) + f"{now + 100},5.0\n")
    meter, name = detect(str(path))
    assert isinstance(meter, CsvMeter) and name == f"csv:{path}"
    assert meter.energy_mj() == pytest.approx(2.0 * 10 * 1000)  # 2 W for 10 s; the future row is not counted yet
    with pytest.raises(ValueError, match="does not exist"):
        detect(str(tmp_path / "none.csv"))


def test_no_power_source_says_why():
    reader, why = detect()
    if reader is not None:
        reader.close()
        pytest.skip(f"this host has a power source ({why})")
    assert why.startswith("none:")


class FakeMeter:
    """1 mJ per reading: what a counter would show if each batch used energy."""

    name = "fake"

    def __init__(self):
        self.mj = 0.0

    def energy_mj(self) -> float:
        self.mj += 1.0
        return self.mj

    def close(self) -> None:
        pass


def test_profile_with_a_power_source_supports_energy_plans():
    lm = layers(materialise(load_model(SQUEEZE), "random"), materialised=True)
    devices = parse_devices(["a=CPUExecutionProvider:threads=1", "b=CPUExecutionProvider:threads=2"])
    run = profile_model(lm, devices, runs=2, warmup=1, power=FakeMeter(), transfer_sizes=(4096, 65536))
    plat, prof, _ = build_documents(lm, run, name="sq", platform_name="t", energy_source="fake", model_path=SQUEEZE)
    assert all("energy_mj" in m for layer in prof["layers"] for m in layer["measurements"])
    platform, profile = Platform.model_validate(plat), ModelProfile.model_validate(prof)
    plan = make_plan(platform, profile, PlanRequest(objective="energy"))
    assert plan.metrics.energy_mj is not None and plan.metrics.energy_mj > 0
