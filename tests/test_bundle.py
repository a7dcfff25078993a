"""Deployment bundles (executor/bundle.py, api/bundles.py, `planner bundle`): a plan cut
into per-slice files with a manifest, verified before anything runs, made by the CLI and
by the service, served to the executor tokens of the deployments that run the plan."""

from __future__ import annotations

import hashlib
import json
import subprocess

import httpx
import numpy as np
import onnxruntime as ort
import pytest

from executor.bundle import BundleError, BundleRunner, bundle_inputs, make_bundle, manifest_bytes, read_manifest
from executor.slicing import layers, load_model
from tests.support.server import PLANNER, ROOT, served, token
from tests.test_agent import documents, tiny_model

SPECS = ["cpu1=openvino:CPU,threads=1,affinity=0", "cpu2=openvino:CPU,threads=1,precision=fp32"]


def two_slice_plan(model) -> dict:  # noqa: ANN001
    """A plan document of the tiny model: conv1..conv2 on cpu1, gap..fc on cpu2."""
    ids = [layer.id for layer in layers(load_model(model)).layers]
    return {"id": "p-two", "plan": {"notation": "A1-2 B3-4", "metrics": {"latency_ms": 2.5}, "layers": [{"layer": i} for i in ids],
                                    "slices": [{"index": 0, "first_index": 0, "last_index": 1, "first_layer": ids[0],
                                                "last_layer": ids[1], "device": "cpu1", "time_ms": 1.5},
                                               {"index": 1, "first_index": 2, "last_index": 3, "first_layer": ids[2],
                                                "last_layer": ids[3], "device": "cpu2", "time_ms": 1.0}]}}


@pytest.fixture
def bundle(tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    manifest = make_bundle(two_slice_plan(model), model, SPECS, tmp_path / "bundle")
    return model, tmp_path / "bundle", manifest


def test_manifest_names_order_tensors_settings_and_hashes(bundle):
    model, directory, manifest = bundle
    assert manifest["plan_id"] == "p-two" and manifest["predicted_latency_ms"] == 2.5
    assert [s["index"] for s in manifest["slices"]] == [0, 1]
    first, second = manifest["slices"]
    # the tensors chain: what the second slice reads, the first writes
    assert {t["name"] for t in second["inputs"]} <= {t["name"] for t in first["outputs"]}
    assert [t["name"] for t in manifest["inputs"]] == ["x"] and [t["name"] for t in manifest["outputs"]] == ["y"]
    assert first["inputs"][0] == {"name": "x", "dtype": "float32", "shape": [1, 3, 64, 64]}
    for s in manifest["slices"]:
        data = (directory / s["file"]).read_bytes()
        assert s["sha256"] == hashlib.sha256(data).hexdigest() and s["bytes"] == len(data)
    assert first["settings"]["affinity"] == [0] and first["settings"]["threads"] == 1
    assert first["settings"]["properties"]["INFERENCE_NUM_THREADS"] == "1"
    assert first["settings"]["properties"]["PERFORMANCE_HINT"] == "LATENCY"
    assert second["settings"]["properties"]["INFERENCE_PRECISION_HINT"] == "f32"
    assert (first["predicted_ms"], second["predicted_ms"]) == (1.5, 1.0)
    assert read_manifest((directory / "manifest.json").read_bytes()) == manifest


def test_python_executor_runs_a_bundle_as_the_unsplit_model(bundle):
    model, directory, _ = bundle
    runner = BundleRunner(directory)
    inputs = bundle_inputs(runner.manifest)
    outputs, slice_ms = runner.run_timed(inputs)
    reference = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(["y"], inputs)[0]
    assert len(slice_ms) == 2 and all(t > 0 for t in slice_ms)
    np.testing.assert_allclose(outputs["y"], reference, rtol=1e-4, atol=1e-5)


def test_a_truncated_or_altered_file_or_a_bad_manifest_is_refused(bundle):
    _, directory, manifest = bundle
    path = directory / manifest["slices"][1]["file"]
    good = path.read_bytes()
    path.write_bytes(good[:-10])
    with pytest.raises(BundleError, match=r"slices\[1\]\.bytes: .*truncated"):
        BundleRunner(directory)
    path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(BundleError, match=r"slices\[1\]\.sha256"):
        BundleRunner(directory)
    path.write_bytes(good)
    BundleRunner(directory)  # whole again
    bad = dict(manifest, slices=[dict(manifest["slices"][0], file="../slice-0.onnx")])
    with pytest.raises(BundleError, match=r"slices\[0\]\.file"):
        read_manifest(manifest_bytes(bad))
    with pytest.raises(BundleError, match="manifest.format"):
        read_manifest(b'{"slices": []}')
    with pytest.raises(BundleError, match="bundle id"):
        BundleRunner(directory, expect_sha256="0" * 64)


def test_make_bundle_names_what_is_missing(tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    with pytest.raises(BundleError, match="devices: no spec for the plan's device.* cpu2"):
        make_bundle(two_slice_plan(model), model, SPECS[:1], tmp_path / "b")
    with pytest.raises(BundleError, match="model: not a readable ONNX model"):
        make_bundle(two_slice_plan(model), b"not onnx", SPECS, tmp_path / "b")
    plan = two_slice_plan(model)
    plan["plan"]["slices"][1]["first_index"] = 3
    plan["plan"]["layers"] = []
    with pytest.raises(BundleError, match="plan.slices"):
        make_bundle(plan, model, SPECS, tmp_path / "b")


def test_cli_makes_and_runs_a_bundle(tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    (tmp_path / "plan.json").write_text(json.dumps(two_slice_plan(model)))
    cmd = [str(PLANNER), "bundle", "--plan", str(tmp_path / "plan.json"), "--model", str(model), "--out", str(tmp_path / "b"),
           "--json"] + [x for spec in SPECS for x in ("--device", spec)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["slices"] == 2 and info["id"] == hashlib.sha256((tmp_path / "b" / "manifest.json").read_bytes()).hexdigest()
    run = subprocess.run([str(PLANNER), "bundle", "--run", str(tmp_path / "b"), "--frames", "5", "--warmup", "1", "--json",
                          "--dump-outputs", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["frames"] == 5 and (tmp_path / "out" / "y.bin").stat().st_size == 40
    bad = subprocess.run(cmd[:6] + ["--out", str(tmp_path / "c"), "--device", SPECS[0]], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode != 0 and "cpu2" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_service_makes_stores_and_serves_bundles_to_the_deployments_tokens(tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    platform, profile = documents(model)
    service = served(tmp_path / "data", platform, profile, env={"PLANNER_MAX_BODY_BYTES": "300000"})
    with service as (server, ci, pipe, pid, mid):
        plans = []
        for dev in ("cpu1", "cpu2"):
            r = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "constraints": {"devices": [dev]}})
            assert r.status_code in (200, 201), r.text
            plans.append(r.json()["id"])
        assert pipe.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profile_id": mid}).status_code == 201
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": plans[0]}).status_code == 200
        board = httpx.Client(base_url=server.url, headers={
            "Authorization": f"Bearer {token(server, '--name', 'board', '--scope', 'executor', '--deployment', 'cam')}"})

        def post(plan: str, body: bytes, *specs: str, media: str = "application/octet-stream") -> httpx.Response:
            return pipe.post(f"/v1/plans/{plan}/bundle", params={"device": list(specs)}, content=body,
                             headers={"Content-Type": media})

        assert board.get(f"/v1/plans/{plans[0]}/bundle").status_code == 404  # none made yet
        onnx_bytes = model.read_bytes()
        r = post(plans[0], onnx_bytes, *SPECS)
        assert r.status_code == 201, r.text
        info = r.json()
        assert info["slices"] == 1 and r.headers["etag"] == f'"{info["id"]}"'
        again = post(plans[0], onnx_bytes, *SPECS)
        assert again.status_code == 200 and again.json()["id"] == info["id"]  # content-addressed
        # bad input: a clear 4xx naming the field, never a 500
        r = post(plans[0], onnx_bytes, SPECS[1])
        assert r.status_code == 422 and r.json()["errors"][0]["path"] == "query.device" and "cpu1" in r.text
        r = post(plans[0], b"not a model", *SPECS)
        assert r.status_code == 422 and r.json()["errors"][0]["path"] == "<body>"
        assert post(plans[0], onnx_bytes, *SPECS, media="text/plain").status_code == 415
        assert post("nope", onnx_bytes, *SPECS).status_code == 404
        assert post(plans[0], b"\0" * 300_001, *SPECS).status_code == 413  # a model is a document: its limit
        assert pipe.post(f"/v1/plans/{plans[0]}/bundle", content=onnx_bytes,
                         headers={"Content-Type": "application/octet-stream"}).status_code == 422  # no device
        # the board reads the active plan's bundle, with its ETag
        m = board.get(f"/v1/plans/{plans[0]}/bundle")
        assert m.status_code == 200 and hashlib.sha256(m.content).hexdigest() == info["id"]
        assert m.headers["etag"] == f'"{info["id"]}"'
        assert board.get(f"/v1/plans/{plans[0]}/bundle", headers={"If-None-Match": m.headers["etag"]}).status_code == 304
        manifest = read_manifest(m.content)
        assert manifest["plan_id"] == plans[0]
        sha = manifest["slices"][0]["sha256"]
        f = board.get(f"/v1/plans/{plans[0]}/bundle/files/{sha}")
        assert f.status_code == 200 and hashlib.sha256(f.content).hexdigest() == sha
        # a plan its deployment never ran is not the executor token's to read; nor a blob of another plan
        assert post(plans[1], onnx_bytes, *SPECS).status_code == 201
        assert board.get(f"/v1/plans/{plans[1]}/bundle").status_code == 403
        assert pipe.get(f"/v1/plans/{plans[1]}/bundle/files/{'0' * 64}").status_code == 404
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": plans[1]}).status_code == 200
        assert board.get(f"/v1/plans/{plans[1]}/bundle").status_code == 200
        assert board.get(f"/v1/plans/{plans[0]}/bundle").status_code == 200  # ran before: a rollback needs it
        # the CLI asks the service the same way
        out = subprocess.run([str(PLANNER), "bundle", "--plan", plans[0], "--model", str(model), "--server", server.url,
                              "--token", ci, "--json"] + [x for s in SPECS for x in ("--device", s)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["id"] == info["id"]
