"""Deployments of multi-network schedules (issue 26) through the service: a deployment
names several profiles and activates a schedule entry with the revisions, history,
rollback, ETag and long-poll plans have; an unschedulable entry is refused (422 with
its violations) unless forced; every bad input is a 422 naming the field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.core.telemetry import AgentScheduleAnswer
from tests import schedule_instances as si
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("schedep"))
    yield a
    a.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def ids(api):
    rng = np.random.default_rng(7)
    docs = {"platform": si.platform(rng), "a": si.profile(rng, "A", 4), "b": si.profile(rng, "B", 4),
            "c": si.profile(rng, "C", 3)}
    return {k: api.upload("platform" if k == "platform" else "profile", d.model_dump(mode="json", exclude_none=True))
            for k, d in docs.items()}


def schedule(api, ids, period_a: float, period_b: float) -> dict:
    r = api.client.post("/v1/schedules", headers=api.h(), json={
        "platform_id": ids["platform"], "solver": "exhaustive",
        "apps": [{"profile_id": ids["a"], "period_ms": period_a, "priority": 0},
                 {"profile_id": ids["b"], "period_ms": period_b, "priority": 1}]})
    assert r.status_code in (200, 202), r.text  # 200: the same request again (reused)
    job = api.wait_job(r.json()["id"])
    assert job["state"] == "succeeded", job
    return api.client.get(f"/v1/schedules/{job['schedule_id']}?view=entries&limit=1000", headers=api.h()).json()


def field_of(r) -> str:
    assert r.status_code == 422, r.text
    return r.json()["errors"][0]["path"]


def test_a_schedule_deployment_activates_entries_with_revisions_rollback_etag_and_long_poll(api, ids):
    s = schedule(api, ids, 60.0, 80.0)
    ok = [i for i, e in enumerate(s["schedule"]["entries"]) if e["schedulable"]]
    assert len(ok) >= 2, "the instance must give two schedulable entries"
    r = api.client.post("/v1/deployments", headers=api.h(),
                        json={"name": "duo", "platform_id": ids["platform"], "profile_ids": [ids["a"], ids["b"]]})
    assert r.status_code == 201, r.text
    dep = r.json()
    assert dep["profile_ids"] == [ids["a"], ids["b"]] and dep["active_schedule"] is None
    board = api.token("board", ["executor"], [dep["id"]])
    exe = {"Authorization": f"Bearer {board}"}
    assert api.client.get("/v1/deployments/duo/plan", headers=exe).status_code == 404

    r = api.client.put("/v1/deployments/duo/active", headers=api.h(), json={"schedule_id": s["id"], "entry": ok[0]})
    assert r.status_code == 200, r.text
    assert r.json()["active_schedule"] == {"schedule_id": s["id"], "entry": ok[0]} and r.json()["revision"] == 1
    again = api.client.put("/v1/deployments/duo/active", headers=api.h(), json={"schedule_id": s["id"], "entry": ok[0]})
    assert again.json()["revision"] == 1  # idempotent
    got = api.client.get("/v1/deployments/duo/plan", headers=exe)
    assert got.status_code == 200
    answer = AgentScheduleAnswer.model_validate(got.json())
    entry = s["schedule"]["entries"][ok[0]]
    assert answer.revision == 1 and answer.schedule.entry == ok[0] and answer.schedule.schedulable
    assert [n.name for n in answer.schedule.networks] == ["A", "B"]
    assert [n.mapping for n in answer.schedule.networks] == [a["mapping"] for a in entry["apps"]]
    assert [n.period_ms for n in answer.schedule.networks] == [60.0, 80.0]
    assert [n.priority for n in answer.schedule.networks] == [0, 1]
    assert [n.predicted_response_ms for n in answer.schedule.networks] == [a["response_time_ms"] for a in entry["apps"]]
    assert len(answer.schedule.networks[0].layers) == 4 and [p.pe for p in answer.schedule.pes] == entry["pes"]
    etag = got.headers["etag"]
    assert api.client.get("/v1/deployments/duo/plan", headers={**exe, "If-None-Match": etag}).status_code == 304

    # long-poll: held until the entry changes (here: already changed by the time it asks)
    api.client.put("/v1/deployments/duo/active", headers=api.h(), json={"schedule_id": s["id"], "entry": ok[1]})
    polled = api.client.get("/v1/deployments/duo/plan?wait=5", headers={**exe, "If-None-Match": etag})
    assert polled.status_code == 200 and polled.json()["schedule"]["entry"] == ok[1] and polled.json()["revision"] == 2
    assert polled.headers["etag"] != etag

    r = api.client.post("/v1/deployments/duo/rollback", headers=api.h())
    assert r.status_code == 200 and r.json()["active_schedule"]["entry"] == ok[0] and r.json()["revision"] == 3
    hist = api.client.get("/v1/deployments/duo/history", headers=api.h()).json()["items"]
    assert [(h["action"], h["schedule_id"], h["entry"], h["plan_id"]) for h in hist] == [
        ("activate", s["id"], ok[0], None), ("activate", s["id"], ok[1], None), ("rollback", s["id"], ok[0], None)]
    r = api.client.post("/v1/deployments/duo/rollback", headers=api.h(), json={"revision": 2})
    assert r.json()["active_schedule"]["entry"] == ok[1] and r.json()["revision"] == 4


def test_an_unschedulable_entry_is_refused_with_its_reason_unless_forced(api, ids):
    s = schedule(api, ids, 0.5, 0.5)  # periods far below the networks' latency
    bad = [i for i, e in enumerate(s["schedule"]["entries"]) if not e["schedulable"]]
    assert bad
    api.client.post("/v1/deployments", headers=api.h(),
                    json={"name": "tight", "platform_id": ids["platform"], "profile_ids": [ids["b"], ids["a"]]})
    r = api.client.put("/v1/deployments/tight/active", headers=api.h(), json={"schedule_id": s["id"], "entry": bad[0]})
    assert field_of(r) == "entry"
    reason = r.json()["errors"][0]["reason"]
    assert "not schedulable" in reason and "force" in reason
    assert s["schedule"]["entries"][bad[0]]["violations"][0][:40] in reason
    assert api.client.get("/v1/deployments/tight", headers=api.h()).json()["revision"] == 0
    r = api.client.put("/v1/deployments/tight/active", headers=api.h(),
                       json={"schedule_id": s["id"], "entry": bad[0], "force": True})
    assert r.status_code == 200 and r.json()["active_schedule"]["entry"] == bad[0]


@pytest.mark.parametrize("body,field", [
    ({"schedule_id": "sch_nope", "entry": 0}, "schedule_id"),
    ({"entry": 0}, "schedule_id"),
    ({"plan_id": "pln_x"}, "plan_id"),
    ({"schedule_id": "SID"}, "entry"),
    ({"schedule_id": "SID", "entry": 999}, "entry"),
    ({"schedule_id": "SID", "entry": -1}, "entry"),
    ({"schedule_id": "SID", "entry": "one"}, "entry"),
    ({"schedule_id": "SID", "entry": 0, "force": "maybe"}, "force"),
])
def test_bad_activations_are_422_naming_the_field(api, ids, body, field):
    s = schedule(api, ids, 60.0, 80.0)
    api.client.post("/v1/deployments", headers=api.h(),
                    json={"name": "bad", "platform_id": ids["platform"], "profile_ids": [ids["a"], ids["b"]]})
    body = {k: (s["id"] if v == "SID" else v) for k, v in body.items()}
    assert field_of(api.client.put("/v1/deployments/bad/active", headers=api.h(), json=body)).endswith(field)


def test_schedules_and_deployments_must_match(api, ids):
    s = schedule(api, ids, 60.0, 80.0)
    h = api.h()
    api.client.post("/v1/deployments", headers=h, json={"name": "other", "platform_id": ids["platform"],
                                                       "profile_ids": [ids["a"], ids["c"]]})
    r = api.client.put("/v1/deployments/other/active", headers=h, json={"schedule_id": s["id"], "entry": 0})
    assert field_of(r) == "schedule_id" and "networks" in r.json()["errors"][0]["reason"]
    api.client.post("/v1/deployments", headers=h, json={"name": "single", "platform_id": ids["platform"],
                                                       "profile_id": ids["a"]})
    r = api.client.put("/v1/deployments/single/active", headers=h, json={"schedule_id": s["id"], "entry": 0})
    assert field_of(r) == "schedule_id" and "runs plans" in r.json()["errors"][0]["reason"]
    # creation: exactly one of profile_id / profile_ids, every id known, none twice
    base = {"name": "x", "platform_id": ids["platform"]}
    assert field_of(api.client.post("/v1/deployments", headers=h, json=base)) == "profile_id"
    assert field_of(api.client.post("/v1/deployments", headers=h, json={
        **base, "profile_id": ids["a"], "profile_ids": [ids["b"]]})) == "profile_id"
    assert field_of(api.client.post("/v1/deployments", headers=h, json={
        **base, "profile_ids": [ids["a"], "0" * 64]})) == "profile_ids[1]"
    assert field_of(api.client.post("/v1/deployments", headers=h, json={
        **base, "profile_ids": [ids["a"], ids["a"]]})) == "profile_ids"
    assert field_of(api.client.post("/v1/deployments", headers=h, json={**base, "profile_ids": []})).startswith("profile_ids")
    assert field_of(api.client.post("/v1/deployments", headers=h, json={**base, "profile_ids": ["x"]})).startswith("profile_ids")


@pytest.fixture()
def deploy(api, monkeypatch, capsys):
    """`planner deploy ...` in this process, its client talking to the in-process service."""
    from fastapi.testclient import TestClient

    from planner_cli import main as cli
    from planner_cli.commands import client

    def init(self, server, token):
        self.server, self.token = server, token
        self.http = TestClient(api.client.app, headers={"Authorization": f"Bearer {token}"})

    monkeypatch.setattr(client.Client, "__init__", init)

    def run(*args: str) -> tuple[int, str, str]:
        rc = cli.main(["deploy", "--token", api.tokens["pipeline"], *args])
        got = capsys.readouterr()
        return rc, got.out, got.err

    return run


def test_planner_deploy_activates_schedule_entries_creating_the_deployment_on_first_use(api, ids, deploy):
    s = schedule(api, ids, 60.0, 80.0)
    ok = [i for i, e in enumerate(s["schedule"]["entries"]) if e["schedulable"]]
    rc, out, err = deploy("--deployment", "cli-duo", "--schedule", s["id"], "--entry", str(ok[0]))
    assert rc == 0, err
    assert out.strip().endswith(f"revision 1: active schedule {s['id']} entry {ok[0]}"), out
    dep = api.client.get("/v1/deployments/cli-duo", headers=api.h()).json()
    assert dep["platform_id"] == ids["platform"] and dep["profile_ids"] == [ids["a"], ids["b"]]
    rc, out, _ = deploy("--deployment", "cli-duo", "--schedule", s["id"], "--entry", str(ok[1]))
    assert rc == 0 and f"revision 2: active schedule {s['id']} entry {ok[1]}" in out
    rc, out, _ = deploy("--deployment", "cli-duo", "--history")
    assert rc == 0 and [ln.split()[2:5] for ln in out.splitlines()] == [[s["id"], "entry", str(ok[0])],
                                                                        [s["id"], "entry", str(ok[1])]], out
    rc, out, _ = deploy("--deployment", "cli-duo", "--rollback")
    assert rc == 0 and f"revision 3: active schedule {s['id']} entry {ok[0]}" in out
    rc, out, _ = deploy("--deployment", "cli-duo", "--json", "--schedule", s["id"], "--entry", str(ok[1]))
    assert rc == 0 and json.loads(out)["active_schedule"] == {"schedule_id": s["id"], "entry": ok[1]}


def test_planner_deploy_refuses_an_unschedulable_entry_unless_forced(api, ids, deploy):
    s = schedule(api, ids, 0.5, 0.5)
    bad = next(i for i, e in enumerate(s["schedule"]["entries"]) if not e["schedulable"])
    rc, out, err = deploy("--deployment", "cli-tight", "--schedule", s["id"], "--entry", str(bad))
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"planner: error: --entry: entry {bad} is not schedulable") and "force" in err
    rc, out, err = deploy("--deployment", "cli-tight", "--schedule", s["id"], "--entry", str(bad), "--force")
    assert rc == 0 and f"revision 1: active schedule {s['id']} entry {bad}" in out, err


def test_planner_deploy_without_entry_takes_the_first_schedulable_one_or_says_none_is(api, ids, deploy):
    """--entry left out: the first entry (best first) the analysis calls schedulable; where
    none is (bounds measured on a busy host can exceed every period), a one-line refusal
    saying so and how close the closest came, and nothing is created."""
    s = schedule(api, ids, 60.0, 80.0)
    first = next(i for i, e in enumerate(s["schedule"]["entries"]) if e["schedulable"])
    rc, out, err = deploy("--deployment", "cli-first", "--schedule", s["id"])
    assert rc == 0 and f"revision 1: active schedule {s['id']} entry {first}" in out, err
    tight = schedule(api, ids, 0.01, 0.01)
    assert not any(e["schedulable"] for e in tight["schedule"]["entries"])
    rc, out, err = deploy("--deployment", "cli-none", "--schedule", tight["id"])
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("planner: error: --entry: none of the schedule's") and "x its period" in err and "--force" in err
    assert api.client.get("/v1/deployments/cli-none", headers=api.h()).status_code == 404


@pytest.mark.parametrize("args,problems", [
    (["--schedule", "sch_nope"], ["--schedule: no schedule with id sch_nope"]),
    (["--plan", "pln_x", "--schedule", "SID", "--entry", "-1", "--verify", "1"],
     ["--plan --schedule: give exactly one of", "--entry: -1 is negative"]),
    (["--entry", "0", "--force", "--revision", "2"],
     ["--plan: give exactly one of", "--entry: only with --schedule", "--force: only with --schedule",
      "--revision: only with --rollback"]),
    (["--rollback", "--schedule", "SID", "--entry", "0", "--verify", "2"],
     ["--schedule --rollback: give exactly one of", "--verify: only with --plan"]),
    (["--schedule", "sch_nope", "--entry", "0"], ["--schedule: no schedule with id sch_nope"]),
    (["--schedule", "SID", "--entry", "999"], ["--entry: 999 is out of range"]),
])
def test_planner_deploy_bad_combinations_are_one_line_listing_every_problem(api, ids, deploy, args, problems):
    s = schedule(api, ids, 60.0, 80.0)
    rc, out, err = deploy("--deployment", "cli-bad", *[s["id"] if a == "SID" else a for a in args])
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("planner: error: " + (f"{len(problems)} problems: " if len(problems) > 1 else "")), err
    for p in problems:
        assert p in err, (p, err)
    created = api.client.get("/v1/deployments/cli-bad", headers=api.h())
    assert created.status_code == 404 or created.json()["revision"] == 0  # nothing activated


def test_the_telemetry_summary_has_each_segments_prediction_from_the_schedules_evaluator(api, ids):
    """Each segment's predicted time beside its measured median: the PE occupancy the
    schedule's evaluator charges for its layers, which its stored timeline shows as each
    layer's finish - start (ASAP), in the executor's view, the summary and the UI page."""
    import re

    from api.schedule_deployments import runs

    s = schedule(api, ids, 60.0, 80.0)
    full = api.client.get(f"/v1/schedules/{s['id']}?view=entries&limit=1000&timelines=true", headers=api.h()).json()
    k, entry = next((i, e) for i, e in enumerate(full["schedule"]["entries"]) if e.get("timeline"))
    took = {(it["app"], it["layer"]): it["finish_ms"] - it["start_ms"] for items in entry["timeline"].values()
            for it in items}
    api.client.post("/v1/deployments", headers=api.h(),
                    json={"name": "segs", "platform_id": ids["platform"], "profile_ids": [ids["a"], ids["b"]]})
    r = api.client.put("/v1/deployments/segs/active", headers=api.h(), json={"schedule_id": s["id"], "entry": k,
                                                                             "force": True})
    assert r.status_code == 200, r.text
    board = {"Authorization": f"Bearer {api.token('board-segs', ['executor'], [r.json()['id']])}"}
    view = AgentScheduleAnswer.model_validate(api.client.get("/v1/deployments/segs/plan", headers=board).json()).schedule
    expected = {}
    for n in view.networks:
        cuts = runs(n.mapping)
        expected[n.name] = [sum(took[(n.name, n.layers[i])] for i in range(a, b + 1)) for a, b, _ in cuts]
        assert n.predicted_segment_ms == pytest.approx(expected[n.name], rel=1e-9, abs=1e-9), n.name
        assert all(t > 0 for t in n.predicted_segment_ms)
    # a board reports its frames: the summary puts each segment's measured median beside the prediction
    frames = [{"network": n.name, "seq": q, "response_ms": 3.0 * sum(expected[n.name]),
               "segment_ms": [2.0 * t + 0.1 * q for t in expected[n.name]], "missed": False}
              for n in view.networks for q in range(5)]
    r = api.client.post("/v1/deployments/segs/telemetry", headers=board, json={
        "batch_id": "segs-1", "schedule_id": s["id"], "entry": k, "revision": 1, "frames": frames})
    assert r.status_code == 201, r.text
    tel = api.client.get("/v1/deployments/segs/telemetry", headers=api.h()).json()["schedules"]
    for net in tel[0]["networks"]:
        for seg, pred in zip(net["segments"], expected[net["name"]], strict=True):
            assert seg["predicted_ms"] == pytest.approx(pred) and seg["median_ms"] == pytest.approx(2.0 * pred + 0.2)
            assert seg["error_pct"] == pytest.approx(100.0 * (pred + 0.2) / pred)
    # the deployment page's segment rows show it
    csrf = re.search(r'name="csrf" value="([^"]+)"', api.client.get("/ui/login").text).group(1)
    api.client.post("/ui/login", data={"token": api.tokens["pipeline"], "csrf": csrf, "next": "/ui"},
                    follow_redirects=False)
    html = api.client.get("/ui/deployments/segs").text
    shown = re.findall(r'class="num seg-predicted">([^<]*)<', html)
    assert shown == [f"{t:.3f}" for n in view.networks for t in expected[n.name]], shown
    assert "segment predicted" in html


def test_an_entry_is_checked_on_a_plan_worker_not_in_the_service(api, ids, monkeypatch):
    """Issue 21: activating a schedule entry ran json.loads on the whole stored schedule
    (up to 20 MB) and walked its networks' refit lineage by parsing whole profiles, in the
    service's process. A plan worker does both now; the refusals are the same."""
    from api import schedule_deployments

    a_doc = api.client.get(f"/v1/profiles/{ids['a']}", headers=api.h()).json()
    a2 = api.upload("profile", {**a_doc, "refit_of": ids["a"]})
    plain = schedule(api, ids, 60.0, 80.0)
    n = len(plain["schedule"]["entries"])
    unschedulable = next((i for i, e in enumerate(plain["schedule"]["entries"]) if not e["schedulable"]), None)
    refit = schedule(api, {**ids, "a": a2}, 60.0, 80.0)
    other = schedule(api, {**ids, "a": ids["c"]}, 60.0, 80.0)
    r = api.client.post("/v1/deployments", headers=api.h(),
                        json={"name": "entry-check", "platform_id": ids["platform"], "profile_ids": [ids["a"], ids["b"]]})
    assert r.status_code == 201, r.text

    def in_the_service(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the entry check parsed a schedule or profile in the service's process")

    class NoSchedules:  # the module's json, refusing to parse a schedule document
        dumps = staticmethod(json.dumps)

        @staticmethod
        def loads(text, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN205
            if '"entries"' in str(text):
                in_the_service()
            return json.loads(text, *a, **kw)

    monkeypatch.setattr(api.service.planner, "parsed", in_the_service)
    monkeypatch.setattr(schedule_deployments, "json", NoSchedules)
    put = lambda body: api.client.put("/v1/deployments/entry-check/active", headers=api.h(), json=body)  # noqa: E731
    r = put({"schedule_id": plain["id"], "entry": n})
    assert field_of(r) == "entry" and f"the schedule has {n} entries (0..{n - 1})" in r.json()["detail"]
    if unschedulable is not None:
        r = put({"schedule_id": plain["id"], "entry": unschedulable})
        assert field_of(r) == "entry" and "force=true activates it anyway" in r.json()["detail"]
    assert field_of(put({"schedule_id": other["id"], "entry": 0, "force": True})) == "schedule_id"
    r = put({"schedule_id": refit["id"], "entry": 0, "force": True})  # a refit network's schedule: the same line
    assert r.status_code == 200 and r.json()["active_schedule"] == {"schedule_id": refit["id"], "entry": 0}, r.text
    # the board's view of the entry (the whole schedule and the networks' profiles read): a plan worker's too
    board = {"Authorization": f"Bearer {api.token('board-entry-check', ['executor'], [r.json()['id']])}"}
    from api.pages import CALLS

    monkeypatch.undo()  # the view as the service's process made it before issue 21 (in this process)
    want = json.loads(CALLS["entry-view"](api.service.planner, refit["id"], 0))
    monkeypatch.setattr(api.service.planner, "parsed", in_the_service)
    monkeypatch.setattr(schedule_deployments, "json", NoSchedules)
    monkeypatch.setattr(api.service, "executor_views", type(api.service.executor_views)(8))  # nothing cached
    got = api.client.get("/v1/deployments/entry-check/plan", headers=board)
    assert got.status_code == 200 and got.json()["schedule"] == want and want["entry"] == 0, got.text
    frames = [{"network": n["name"], "seq": 0, "response_ms": 5.0, "segment_ms": [1.0] * len(n["predicted_segment_ms"]),
               "missed": False} for n in got.json()["schedule"]["networks"]]
    monkeypatch.setattr(api.service, "executor_views", type(api.service.executor_views)(8))
    r = api.client.post("/v1/deployments/entry-check/telemetry", headers=board, json={
        "batch_id": "entry-check-1", "schedule_id": refit["id"], "entry": 0, "revision": 1, "frames": frames})
    assert r.status_code == 201, r.text  # its frames checked against the entry's view
    r = api.client.post("/v1/deployments/entry-check/telemetry", headers=board, json={
        "batch_id": "entry-check-2", "schedule_id": refit["id"], "entry": 0, "revision": 1,
        "frames": [{**frames[0], "network": "nope"}]})
    assert field_of(r) == "frames[0].network"
