"""A schedule deployment end to end (issue 26), with a real service and a real agent
process: two networks profiled here, scheduled by the service, an entry deployed; the
agent (`planner agent --model NAME=FILE ...`) runs it on executor.pipeline, swaps to a
second entry between hyperperiods losing no frame, keeps that entry when a third cannot
be built (reported), and a forced unschedulable entry's deadline misses are reported as
misses; the service summarises predicted vs measured per network, segment and PE."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid

import httpx
import onnx
import pytest

from tests.support.genmodels import deep_thin_cnn
from tests.support.server import PLANNER, ROOT, Server, wait_for
from test_agent import tiny_model, token

DEVICE = "cpu=CPUExecutionProvider"
pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="schedules over two 1-core PEs need 2 cores")


def profile(model, name: str, tmp_path) -> tuple[dict, dict]:  # noqa: ANN001
    p, m = tmp_path / f"p-{name}.json", tmp_path / f"m-{name}.json"
    # --regime-frames 0: these tests are about serving an entry, not about the bound; the
    # executor-regime run would charge whatever stalls this shared box had to every bound
    out = subprocess.run([str(PLANNER), "profile", str(model), "--pe-cluster", DEVICE, "--runs", "3", "--warmup", "1",
                          "--regime-frames", "0", "--name", name, "--platform-name", "here", "--out-platform", str(p), "--out-profile", str(m)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(p.read_text()), json.loads(m.read_text())


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("schedagent")
    a, b = tmp / "a.onnx", tmp / "b.onnx"
    tiny_model(a)
    onnx.save(deep_thin_cnn(depth=4, channels=8, size=32), str(b))
    platform, prof_a = profile(a, "A", tmp)
    _, prof_b = profile(b, "B", tmp)  # the same cluster: A's platform document serves both
    server = Server(tmp / "data", env={"PLANNER_MAX_WAIT_S": "2"}).start()
    try:
        ci = token(server, "--name", "ci", "--scope", "pipeline")
        pipe = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ci}"}, timeout=60)
        ids = {"platform": pipe.post("/v1/platforms", json=platform).json()["id"],
               "A": pipe.post("/v1/profiles", json=prof_a).json()["id"],
               "B": pipe.post("/v1/profiles", json=prof_b).json()["id"]}
        yield {"server": server, "pipe": pipe, "ids": ids, "a": a, "b": b, "tmp": tmp, "prof_a": prof_a,
               "prof_b": prof_b, "platform": platform}
    finally:
        server.stop()


def schedule(pipe: httpx.Client, ids: dict, period_a: float, period_b: float) -> dict:
    r = pipe.post("/v1/schedules", json={
        "platform_id": ids["platform"], "solver": "exhaustive", "cpu_partitions": {"cpu": [[1, 1]]},
        "apps": [{"profile_id": ids["A"], "period_ms": period_a, "priority": 0},
                 {"profile_id": ids["B"], "period_ms": period_b, "priority": 1}]})
    assert r.status_code in (200, 202), r.text
    job = wait_for(lambda: (j := pipe.get(f"/v1/jobs/{r.json()['id']}").json())["state"] in ("succeeded", "failed") and j,
                   60, "the schedule job")
    assert job["state"] == "succeeded", job
    return pipe.get(f"/v1/schedules/{job['schedule_id']}?view=entries&limit=1000").json()


NICE_PERIODS_MS = (0.2, 0.15, 0.125, 0.12, 0.1, 0.08, 0.075, 0.06, 0.05, 0.04, 0.03, 0.025, 0.02, 0.01)


def period_under(relaxed: dict, prof: dict, name: str, hyper_ms: float) -> float:
    """A period that divides `hyper_ms` (the schedule repeats), under 0.9x the bound of network
    `name` (the highest priority: its bound does not depend on the periods) in every entry of a
    schedule at relaxed periods, so unschedulable on every mapping, and under 0.75x its
    fastest profiled time, so it misses when run, whatever this machine's speed. A fixed 0.2 ms
    was neither on a fast host: the tiny model ran in 0.18 ms, every entry came out
    schedulable; a period just under the bound met every deadline (the bound is pessimistic)."""
    bounds = [a["response_time_ms"] for e in relaxed["schedule"]["entries"] for a in e["apps"] if a["name"] == name]
    by_device: dict[str, float] = {}
    for layer in prof["layers"]:
        for m in layer["measurements"]:
            by_device[m["device"]] = by_device.get(m["device"], 0.0) + m["time_ms"]
    under = min(0.9 * min(bounds), 0.75 * min(by_device.values()))
    # a short decimal: periods of the form 60 / k got no misses reported within 60 s, 0.2 did; why was not
    # established (a guess: the board finds when periods repeat from their decimals)
    return max((p for p in NICE_PERIODS_MS if p < under and hyper_ms / p == round(hyper_ms / p)), default=NICE_PERIODS_MS[-1])


def stopped(proc: subprocess.Popen) -> tuple[str, str]:
    """SIGTERM (the agent posts what is left and exits), killed with its group if it hangs; its output."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate(timeout=10)


def agent(world, board: str, *extra: str) -> subprocess.Popen:  # noqa: ANN001
    return subprocess.Popen(
        [str(PLANNER), "agent", "--server", world["server"].url, "--deployment", "duo", "--model", f"A={world['a']}",
         "--model", f"B={world['b']}", "--device", DEVICE, "--duration", "120", "--batch-s", "0.3", "--poll-wait", "2",
         "--json", *extra],
        cwd=ROOT, env={**world["server"].env, "PLANNER_TOKEN": board}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)


def test_two_networks_swap_without_losing_a_frame_keep_an_entry_that_cannot_be_built_and_report_misses(world):
    pipe, ids = world["pipe"], world["ids"]
    relaxed = schedule(pipe, ids, 40.0, 60.0)
    other = schedule(pipe, ids, 30.0, 90.0)
    first = (relaxed["id"], next(i for i, e in enumerate(relaxed["schedule"]["entries"]) if e["schedulable"]))
    second = (other["id"], next(i for i, e in enumerate(other["schedule"]["entries"]) if e["schedulable"]))
    r = pipe.post("/v1/deployments", json={"name": "duo", "platform_id": ids["platform"],
                                           "profile_ids": [ids["A"], ids["B"]]})
    assert r.status_code == 201, r.text
    assert pipe.put("/v1/deployments/duo/active", json={"schedule_id": first[0], "entry": first[1]}).status_code == 200
    board = token(world["server"], "--name", "board", "--scope", "executor", "--deployment", "duo")

    def entry(ref) -> dict:  # noqa: ANN001
        r = pipe.get("/v1/deployments/duo/telemetry")
        found = [s for s in r.json()["schedules"] if (s["schedule_id"], s["entry"]) == ref] if r.status_code == 200 else []
        return found[0] if found else {}

    def net(ref, name: str) -> dict:  # noqa: ANN001
        return next((n for n in entry(ref).get("networks", []) if n["name"] == name), {})

    proc = agent(world, board)
    try:
        wait_for(lambda: min(net(first, "A").get("frames", 0), net(first, "B").get("frames", 0)) >= 10, 90,
                 "frames of both networks on the first entry")
        assert pipe.put("/v1/deployments/duo/active", json={"schedule_id": second[0], "entry": second[1]}).status_code == 200
        wait_for(lambda: min(net(second, "A").get("frames", 0), net(second, "B").get("frames", 0)) >= 10, 90,
                 "frames of both networks on the second entry")

        # an entry whose periods repeat only every 40 minutes: refused by the board, the second one keeps running
        odd = schedule(pipe, ids, 40.001, 60.0)
        assert pipe.put("/v1/deployments/duo/active", json={"schedule_id": odd["id"], "entry": 0,
                                                            "force": True}).status_code == 200
        build = lambda: [e for e in pipe.get("/v1/deployments/duo/telemetry").json()["errors"]  # noqa: E731
                         if e["kind"] == "build_failed"]
        wait_for(build, 60, "the build failure reported")
        assert "hyperperiod" in build()[0]["message"] or "repeat every" in build()[0]["message"]
        before = net(second, "A")["frames"]
        wait_for(lambda: net(second, "A")["frames"] >= before + 10, 60, "frames on the previous entry after the failure")
        assert entry((odd["id"], 0)) == {}

        # an entry the analysis calls unschedulable, forced: its misses arrive as misses
        tight = schedule(pipe, ids, period_under(relaxed, world["prof_a"], "A", 60.0), 60.0)
        bad = next(i for i, e in enumerate(tight["schedule"]["entries"]) if not e["schedulable"])
        assert pipe.put("/v1/deployments/duo/active", json={"schedule_id": tight["id"], "entry": bad}).status_code == 422
        assert pipe.put("/v1/deployments/duo/active", json={"schedule_id": tight["id"], "entry": bad,
                                                            "force": True}).status_code == 200
        wait_for(lambda: net((tight["id"], bad), "A").get("deadline_misses", 0) >= 5, 60, "deadline misses reported")
    finally:
        out, err = stopped(proc)
    assert proc.returncode == 0, err
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["build_failures"] == 1 and stats["swaps"] == 3 and stats["deadline_misses"] >= 5

    summary = pipe.get("/v1/deployments/duo/telemetry").json()
    one, two = entry(first), entry(second)
    for name in ("A", "B"):
        a, b = net(first, name), net(second, name)
        # the swap lost no frame: every release ran and was reported, and the numbers run on
        assert a["first_seq"] == 0 and a["frames_lost"] == b["frames_lost"] == 0
        assert b["first_seq"] == a["last_seq"] + 1 and a["frames"] == a["last_seq"] + 1
        assert b["frames"] == b["last_seq"] - b["first_seq"] + 1
        # a release dropped (the network 4 frames behind: a stalled box) is reported, as a miss
        assert a["dropped"] <= a["deadline_misses"] and b["dropped"] <= b["deadline_misses"]
        assert a["predicted_response_ms"] > 0 and a["median_ms"] > 0 and a["max_ms"] >= a["median_ms"]
        assert a["measured_fps"] > 0 and a["segments"] and all(s["samples"] == a["frames"] for s in a["segments"])
        assert all(s["predicted_ms"] > 0 and s["error_pct"] is not None for s in a["segments"])  # the evaluator's
        assert {s["pe"] for s in a["segments"]} <= set(one["schedule_id"] and [p["pe"] for p in one["pes"]])
    assert one["schedulable"] and two["schedulable"] and one["revisions"] == [1] and two["revisions"] == [2]
    assert all(p["measured_utilisation"] is not None and 0 <= p["measured_utilisation"] <= 1.5 for p in one["pes"])
    # every frame's batch says the policy its threads got (real-time where this machine grants it)
    assert set(one["served_scheduling"]) <= {"SCHED_FIFO", "SCHED_OTHER"} and sum(one["served_scheduling"].values()) == one["frames"]
    t = net((tight["id"], bad), "A")
    assert t["deadline_misses"] >= 5 and t["deadline_misses"] <= t["frames"]
    assert any(e["kind"] == "deadline_missed" and "'A'" in e["message"] for e in summary["errors"])
    # the UI's deployment page: the active entry's timeline beside each network's, segment's and PE's telemetry
    ui = httpx.Client(base_url=world["server"].url, timeout=60)
    csrf = re.search(r'name="csrf" value="([^"]+)"', ui.get("/ui/login").text).group(1)
    ci = pipe.headers["Authorization"].split()[1]
    assert ui.post("/ui/login", data={"csrf": csrf, "token": ci, "next": "/ui/plans"}).status_code in (200, 303)
    html = ui.get("/ui/deployments/duo").text
    assert 'id="telemetry-schedules"' in html and 'fig-schedule' in html and 'id="active-entry"' in html
    assert html.count('class="network-row"') == 6 and 'class="segment-row"' in html and 'class="pe-row"' in html
    assert f'{tight["id"]} #{bad}' in html and "unschedulable" in html
    # refit: network A's profile corrected from its segments' times; a schedule of the refit
    # profile goes onto the deployment that measured it
    tmp = world["tmp"]
    (tmp / "A.json").write_text(json.dumps(world["prof_a"]))
    (tmp / "P.json").write_text(json.dumps(world["platform"]))
    out = subprocess.run([str(PLANNER), "refit", "--platform", str(tmp / "P.json"), "--profile", str(tmp / "A.json"),
                          "--server", world["server"].url, "--deployment", "duo", "--token", ci, "--out",
                          str(tmp / "A2.json")], cwd=ROOT, env=world["server"].env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{first[0]}#{first[1]} A:" in out.stdout and "measurement(s) changed" in out.stdout
    refit = json.loads((tmp / "A2.json").read_text())
    assert refit["refit_of"] == ids["A"] and refit != world["prof_a"]
    r = pipe.post(f"/v1/profiles/{ids['A']}/refit", json={"deployment": "duo"})
    assert r.status_code in (200, 201), r.text
    assert r.json()["measurements_changed"] > 0 and r.json()["slices"] > 0
    a2 = pipe.post("/v1/profiles", json=refit).json()["id"]
    r = pipe.post("/v1/schedules", json={"platform_id": ids["platform"], "solver": "exhaustive",
                                         "cpu_partitions": {"cpu": [[1, 1]]},
                                         "apps": [{"profile_id": a2, "period_ms": 40.0, "priority": 0},
                                                  {"profile_id": ids["B"], "period_ms": 60.0, "priority": 1}]})
    job = wait_for(lambda: (j := pipe.get(f"/v1/jobs/{r.json()['id']}").json())["state"] == "succeeded" and j, 60, "job")
    assert pipe.put("/v1/deployments/duo/active", json={"schedule_id": job["schedule_id"], "entry": 0,
                                                        "force": True}).status_code == 200
    assert pipe.post(f"/v1/profiles/{ids['A']}/refit", json={"deployment": "trio-none"}).status_code == 404
    print(json.dumps({"bounds_vs_measured": [
        {"entry": f"{s['schedule_id']}#{s['entry']}", "network": n["name"], "period_ms": n["period_ms"],
         "bound_ms": n["predicted_response_ms"], "median_ms": n["median_ms"], "p90_ms": n["p90_ms"],
         "max_ms": n["max_ms"], "over_bound": n["over_bound"], "frames": n["frames"], "misses": n["deadline_misses"]}
        for s in (one, two) for n in s["networks"]]}))


def test_bad_frames_are_422_naming_the_field(world):
    """A board may post only frames of an entry its deployment ran, of that entry's networks
    and segments."""
    pipe, ids = world["pipe"], world["ids"]
    s = schedule(pipe, ids, 40.0, 60.0)
    e = next(i for i, x in enumerate(s["schedule"]["entries"]) if x["schedulable"])
    pipe.post("/v1/deployments", json={"name": "trio", "platform_id": ids["platform"], "profile_ids": [ids["A"], ids["B"]]})
    pipe.put("/v1/deployments/trio/active", json={"schedule_id": s["id"], "entry": e})
    board = httpx.Client(base_url=world["server"].url, timeout=60, headers={
        "Authorization": f"Bearer {token(world['server'], '--name', 'b3', '--scope', 'executor', '--deployment', 'trio')}"})

    def post(**kw) -> httpx.Response:  # noqa: ANN003
        body = {"batch_id": uuid.uuid4().hex, "schedule_id": s["id"], "entry": e, "revision": 1,
                "frames": [{"network": "A", "seq": 0, "response_ms": 1.0, "segment_ms": [], "missed": False}], **kw}
        return board.post("/v1/deployments/trio/telemetry", json=body)

    assert post().status_code == 201
    cases = [({"entry": e + 100}, "schedule_id"), ({"revision": 7}, "revision"),
             ({"frames": [{"network": "Z", "seq": 0, "response_ms": 1.0}]}, "frames[0].network"),
             ({"frames": [{"network": "A", "seq": 0, "response_ms": 1.0, "segment_ms": [1.0] * 9}]}, "frames[0].segment_ms"),
             ({"frames": [{"network": "A", "seq": -1, "response_ms": 1.0}]}, "frames.0.seq"),
             ({"frames": [{"network": "A", "seq": 0, "response_ms": -1.0}]}, "frames.0.response_ms"),
             ({"schedule_id": None}, "schedule_id"), ({"pes": [{"pe": "nope", "busy_ms": 1.0}]}, "pes[0].pe")]
    for kw, field in cases:
        r = post(**kw)
        assert r.status_code == 422, (kw, r.text)
        paths = [x["path"] for x in r.json()["errors"]]
        assert any(p.replace("[", ".").replace("]", "") .startswith(field.replace("[", ".").replace("]", ""))
                   for p in paths), (kw, paths)


def test_an_entry_this_board_cannot_run_is_refused_naming_every_problem(world):
    """build_entry, directly: networks, layers and devices the board lacks, periods that
    never line up; each a PlanBuildError (the agent reports it and keeps its entry)."""
    from executor.agent import PlanBuildError
    from executor.runtime import parse_device
    from executor.schedule_agent import build_entry, hyperperiod
    from executor.slicing import layers, load_model, materialise
    from planner.core.telemetry import AgentSchedule

    assert hyperperiod([40.0, 60.0]) == (120.0, [3, 2])
    assert hyperperiod([0.5, 0.25]) == (0.5, [1, 2])
    with pytest.raises(PlanBuildError, match="repeat every"):
        hyperperiod([40.001, 60.0])
    lm = {n: layers(materialise(load_model(str(world[f]))), materialised=True) for n, f in (("A", "a"), ("B", "b"))}
    pipe, ids = world["pipe"], world["ids"]
    s = schedule(pipe, ids, 40.0, 60.0)
    pipe.post("/v1/deployments", json={"name": "view", "platform_id": ids["platform"], "profile_ids": [ids["A"], ids["B"]]})
    pipe.put("/v1/deployments/view/active", json={"schedule_id": s["id"], "entry": 0})
    board = token(world["server"], "--name", "b4", "--scope", "executor", "--deployment", "view")
    view = AgentSchedule.model_validate(httpx.get(f"{world['server'].url}/v1/deployments/view/plan",
                                                  headers={"Authorization": f"Bearer {board}"}).json()["schedule"])
    dev = {"cpu": parse_device(DEVICE)}
    built = build_entry(view, lm, dev)
    assert built.hyperperiod_ms == 120.0 and built.counts == [3, 2] and built.pes == [p.pe for p in view.pes]
    with pytest.raises(PlanBuildError) as e:
        build_entry(view, {"A": lm["B"]}, {})
    text = str(e.value)
    assert "no --device for schedule device(s) cpu" in text and "no --model for network 'B'" in text
    assert "network 'A': the entry maps" in text
    with pytest.raises(PlanBuildError, match="cores"):  # more cores than this process may use
        build_entry(view, lm, dev, available_cores=[0])


def test_agent_command_lists_every_problem_in_one_line(world, tmp_path):
    out = subprocess.run([str(PLANNER), "agent", "--server", "http://127.0.0.1:9", "--deployment", "duo", "--model",
                          f"A={world['a']}", "--model", str(world["b"]), "--model", "C=nope.onnx", "--model",
                          f"A={world['a']}", "--device", DEVICE, "--inputs", "x.npz"],
                         cwd=ROOT, env=world["server"].env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    for part in ("expected NAME=FILE.onnx for every network", "no such file: nope.onnx", "network 'A' given twice",
                 "--inputs: not for a schedule deployment"):
        assert part in out.stderr, (part, out.stderr)


def test_each_late_frame_is_one_miss_and_a_dropped_release_is_a_miss_and_a_lost_frame():
    """The agent's accounting of one chunk, on a result with known times: a frame past
    its period is one miss, a release that never ran is a miss and a lost frame, and the
    frame numbers run on from the previous chunk."""
    from executor.agent import Applied
    from executor.pipeline import NetworkResult, PipelineResult
    from executor.schedule_agent import BuiltEntry, ScheduleAgent
    from planner.core.telemetry import AgentSchedule

    view = AgentSchedule.model_validate({
        "schedule_id": "sch_x", "entry": 0, "schedulable": True, "pes": [{"pe": "cpu0", "device": "cpu", "cores": 1}],
        "networks": [{"name": "A", "period_ms": 10.0, "priority": 0, "mapping": ["cpu0", "cpu0"]},
                     {"name": "B", "period_ms": 20.0, "priority": 1, "mapping": ["cpu0"]}]})
    agent = ScheduleAgent("http://127.0.0.1:9", "d", "", {}, [], log=lambda _: None)
    cur = Applied(BuiltEntry(view, None, 20.0, [2, 1], ["cpu0"]), "sch_x#0", 1)
    res = PipelineResult("response_time", [
        NetworkResult("A", 2, 2, 0, 1, [4.0, 12.5], [0.004, 0.0225], True, 1, [0, 1], [[4.0], [12.5]]),
        NetworkResult("B", 1, 0, 1, 1, [], [], True, 1, [], [])], 0.02, False, {}, [0.0165])
    agent._next_seq["A"] = 7
    agent._record(cur, res, [2, 1], 20.0)
    frames = [(f.network, f.seq, f.response_ms, f.missed) for f in agent._frames]
    assert frames == [("A", 7, 4.0, False), ("A", 8, 12.5, True), ("B", 0, None, True)]
    assert agent.stats.deadline_misses == 2 and agent.stats.frames_lost == 1 and agent.stats.frames == 2
    kinds = sorted((e.kind, e.message) for e in agent._errors.values())
    assert [k for k, _ in kinds] == ["deadline_missed", "deadline_missed"] and "'A'" in kinds[0][1]
    agent._current = cur
    agent._cut_batch()
    (batch,) = agent._outbox
    assert (batch.schedule_id, batch.entry, batch.revision, len(batch.frames)) == ("sch_x", 0, 1, 3)
    assert batch.span_ms == 20.0 and [(p.pe, p.busy_ms) for p in batch.pes] == [("cpu0", 16.5)]


def test_a_pipelined_frame_is_no_miss_for_spanning_its_stages_only_an_unfinished_one_is():
    """Throughput mode's accounting: a frame's response time spans every stage, beyond the
    period by design, so only a frame that never finished is a miss; batches say the
    frames ran back to back."""
    from executor.agent import Applied
    from executor.pipeline import NetworkResult, PipelineResult
    from executor.schedule_agent import BuiltEntry, ScheduleAgent
    from planner.core.telemetry import AgentSchedule

    view = AgentSchedule.model_validate({
        "schedule_id": "sch_p", "entry": 0, "schedulable": True, "mode": "throughput",
        "pes": [{"pe": "cpu0", "device": "cpu", "cores": 1}, {"pe": "cpu1", "device": "cpu", "cores": 1}],
        "networks": [{"name": "A", "period_ms": 5.0, "priority": 0, "mapping": ["cpu0", "cpu1"]}]})
    agent = ScheduleAgent("http://127.0.0.1:9", "d", "", {}, [], log=lambda _: None)
    cur = Applied(BuiltEntry(view, None, 5.0, [1], ["cpu0", "cpu1"]), "sch_p#0", 1)
    res = PipelineResult("throughput", [
        NetworkResult("A", 3, 2, 0, 0, [8.0, 9.0], [0.008, 0.013], True, 2, [0, 1], [[4.0, 4.0], [4.5, 4.5]])],
        0.015, False, {}, [0.0085, 0.0085])
    agent._record(cur, res, [3], 15.0)
    assert [(f.seq, f.response_ms, f.missed) for f in agent._frames] == [(0, 8.0, False), (1, 9.0, False), (2, None, True)]
    assert agent.stats.deadline_misses == 1 and agent.stats.frames_lost == 1
    (err,) = agent._errors.values()
    assert err.kind == "deadline_missed" and "unfinished" in err.message
    agent._current = cur
    agent._cut_batch()
    assert agent._outbox[0].regime.mode == "back_to_back"


def test_a_pipelined_entry_is_served_as_a_pipeline_and_judged_on_its_throughput(world):
    """A throughput-mode schedule (one network over two 1-core PEs) deployed: the board
    builds a throughput-mode pipeline, serves it, and the service reports the served
    throughput against the prediction; a frame spanning both stages is no miss."""
    from executor.runtime import parse_device
    from executor.schedule_agent import build_entry
    from executor.slicing import layers, load_model, materialise
    from planner.core.telemetry import AgentSchedule

    pipe, ids = world["pipe"], world["ids"]
    # B's layers made equally heavy (5 ms each on every core count), so the pipelined front is a
    # split over the two PEs whatever this box's measurements were (the test is about serving it)
    balanced = json.loads(json.dumps(world["prof_b"]))
    for layer in balanced["layers"]:
        for m in layer["measurements"]:
            m["time_ms"] = 5.0
            m.pop("time_spread_ms", None)
    balanced["name"] = "B"
    b_id = pipe.post("/v1/profiles", json=balanced).json()["id"]
    r = pipe.post("/v1/schedules", json={"platform_id": ids["platform"], "solver": "exhaustive",
                                         "cpu_partitions": {"cpu": [[1, 1]]},
                                         "apps": [{"profile_id": b_id, "period_ms": 1000.0, "priority": 0}]})
    assert r.status_code in (200, 202), r.text
    job = wait_for(lambda: (j := pipe.get(f"/v1/jobs/{r.json()['id']}").json())["state"] in ("succeeded", "failed") and j,
                   60, "the schedule job")
    s = pipe.get(f"/v1/schedules/{job['schedule_id']}?view=entries&limit=1000").json()
    assert s["schedule"]["mode"] == "throughput"
    k, e = next((i, x) for i, x in enumerate(s["schedule"]["entries"]) if len(set(x["apps"][0]["mapping"])) == 2)
    assert pipe.post("/v1/deployments", json={"name": "piped", "platform_id": ids["platform"],
                                              "profile_ids": [b_id]}).status_code == 201
    assert pipe.put("/v1/deployments/piped/active", json={"schedule_id": s["id"], "entry": k,
                                                          "force": True}).status_code == 200
    board = token(world["server"], "--name", "b-piped", "--scope", "executor", "--deployment", "piped")
    view = AgentSchedule.model_validate(httpx.get(f"{world['server'].url}/v1/deployments/piped/plan",
                                                  headers={"Authorization": f"Bearer {board}"}).json()["schedule"])
    assert view.mode == "throughput" and view.networks[0].period_ms == e["apps"][0]["effective_period_ms"]
    lm = {"B": layers(materialise(load_model(str(world["b"]))), materialised=True)}
    assert build_entry(view, lm, {"cpu": parse_device(DEVICE)}).executor.mode == "throughput"

    def net() -> dict:
        got = pipe.get("/v1/deployments/piped/telemetry")
        sch = got.json()["schedules"] if got.status_code == 200 else []
        return sch[0]["networks"][0] if sch else {}

    proc = subprocess.Popen(
        [str(PLANNER), "agent", "--server", world["server"].url, "--deployment", "piped", "--model", f"B={world['b']}",
         "--device", DEVICE, "--duration", "120", "--batch-s", "0.3", "--poll-wait", "2", "--json"],
        cwd=ROOT, env={**world["server"].env, "PLANNER_TOKEN": board}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    try:
        wait_for(lambda: net().get("frames", 0) >= 30, 90, "frames of the pipelined network")
    finally:
        out, err = stopped(proc)
    assert proc.returncode == 0, err
    sch = pipe.get("/v1/deployments/piped/telemetry").json()["schedules"][0]
    n = sch["networks"][0]
    assert sch["mode"] == "throughput" and n["frames"] >= 30 and n["frames_lost"] == 0
    assert n["deadline_misses"] == 0 and n["dropped"] == 0  # every frame ran; none is late for spanning two stages
    assert n["expected_fps"] == pytest.approx(1000.0 / e["apps"][0]["effective_period_ms"])
    assert n["measured_fps"] > 0 and n["period_error_pct"] == pytest.approx(
        100.0 * (1000.0 / n["measured_fps"] - n["period_ms"]) / n["period_ms"])
    assert len(n["segments"]) >= 2 and all(g["predicted_ms"] > 0 and g["samples"] == n["frames"] for g in n["segments"])
    ui = httpx.Client(base_url=world["server"].url, timeout=60)
    csrf = re.search(r'name="csrf" value="([^"]+)"', ui.get("/ui/login").text).group(1)
    ci = pipe.headers["Authorization"].split()[1]
    assert ui.post("/ui/login", data={"csrf": csrf, "token": ci, "next": "/ui/plans"}).status_code in (200, 303)
    html = ui.get("/ui/deployments/piped").text
    assert "pipelined)" in html and re.search(r'class="period-error">\([+-][0-9.]+% on the period\)', html), html[-3000:]
    print(json.dumps({"pipelined": {k2: n[k2] for k2 in ("period_ms", "expected_fps", "measured_fps", "period_error_pct",
                                                          "median_ms", "max_ms", "frames")},
                      "segments": [(g["pe"], g["predicted_ms"], g["median_ms"]) for g in n["segments"]]}))


class _Ran:
    """An executor stand-in whose last run got the policy it is given."""

    def __init__(self, scheduling) -> None:  # noqa: ANN001 - an executor.realtime.Elevation
        self.scheduling = scheduling


def test_the_agent_reports_its_threads_policy_one_policy_per_batch_and_says_when_it_is_outside_the_bounds():
    """Frames run at SCHED_FIFO and then, after the priority was lost, at SCHED_OTHER: two
    batches, each naming its policy (and why not FIFO), and one log line at the change."""
    from executor.agent import Applied
    from executor.pipeline import NetworkResult, PipelineResult
    from executor.realtime import Elevation
    from executor.schedule_agent import BuiltEntry, ScheduleAgent
    from planner.core.telemetry import AgentSchedule

    view = AgentSchedule.model_validate({
        "schedule_id": "sch_r", "entry": 0, "schedulable": True, "regime_scheduling": "SCHED_FIFO",
        "pes": [{"pe": "cpu0", "device": "cpu", "cores": 1}],
        "networks": [{"name": "A", "period_ms": 10.0, "priority": 0, "mapping": ["cpu0"]}]})
    said: list[str] = []
    agent = ScheduleAgent("http://127.0.0.1:9", "d", "", {}, [], log=said.append)
    built = BuiltEntry(view, _Ran(Elevation(True)), 10.0, [1], ["cpu0"])
    cur = Applied(built, "sch_r#0", 1)
    agent._current = cur

    def chunk() -> None:
        res = PipelineResult("response_time", [NetworkResult("A", 1, 1, 0, 0, [4.0], [0.004], True, 1, [0], [[4.0]])],
                             0.01, False, {}, [0.004])
        agent._record(cur, res, [1], 10.0)

    chunk()
    chunk()
    assert not said  # FIFO, as the bounds were measured
    built.executor.scheduling = Elevation(False, "RLIMIT_RTPRIO is 0")
    chunk()
    assert len(said) == 1 and "SCHED_OTHER" in said[0] and "outside" in said[0]
    chunk()
    agent._cut_batch()
    got = [(b.regime.scheduling, b.regime.scheduling_note, len(b.frames)) for b in agent._outbox]
    assert got == [("SCHED_FIFO", None, 2), ("SCHED_OTHER", "RLIMIT_RTPRIO is 0", 2)]
    assert len(said) == 1  # said once, not per chunk


def test_the_service_counts_frames_against_their_bound_unless_the_agent_named_a_policy_outside_it(monkeypatch):
    """Bounds measured at SCHED_FIFO: a frame the agent ran at SCHED_OTHER is over its bound but
    outside the regime, and the entry's note names why; a frame whose batch said nothing (an
    older agent) and a FIFO frame count against the bound. Bounds that name no policy excuse none."""
    from api import schedule_deployments as sd
    from planner.core.telemetry import AgentSchedule

    def view(regime):  # noqa: ANN001, ANN202
        return AgentSchedule.model_validate({
            "schedule_id": "sch_s", "entry": 0, "schedulable": True, "regime_scheduling": regime,
            "pes": [{"pe": "cpu0", "device": "cpu", "cores": 1}],
            "networks": [{"name": "A", "period_ms": 20.0, "priority": 0, "mapping": ["cpu0"],
                          "predicted_response_ms": 10.0}]}).model_dump_json().encode()

    def body(times, scheduling=None, note=None):  # noqa: ANN001, ANN202
        regime = {"mode": "rate", "scheduling": scheduling, "scheduling_note": note} if scheduling else None
        return {"frames": [{"network": "A", "seq": k, "response_ms": t, "segment_ms": [t], "missed": False}
                           for k, t in times], "span_ms": 100.0, "pes": [], "regime": regime}

    batches = {("sch_s", 0): [(1, body([(0, 5.0), (1, 11.0)], "SCHED_FIFO")),
                              (1, body([(2, 12.0), (3, 13.0), (4, 6.0)], "SCHED_OTHER", "RLIMIT_RTPRIO is 0")),
                              (1, body([(5, 14.0)]))]}
    monkeypatch.setattr(sd, "entry_view", lambda svc, sid, entry: view("SCHED_FIFO"))
    (t,) = sd.schedule_telemetry(None, batches, {})
    (n,) = t.networks
    assert (n.over_bound, n.over_bound_in_regime) == (4, 2)
    assert t.served_scheduling == {"SCHED_FIFO": 2, "SCHED_OTHER": 3, "not reported": 1}
    assert t.regime_note.startswith("3 of 6 frames ran") and "RLIMIT_RTPRIO is 0" in t.regime_note
    monkeypatch.setattr(sd, "entry_view", lambda svc, sid, entry: view(None))
    (t,) = sd.schedule_telemetry(None, batches, {})
    assert (t.networks[0].over_bound, t.networks[0].over_bound_in_regime, t.regime_note) == (4, 4, None)


def test_chunks_beside_the_agents_other_threads_are_counted_and_said_once():
    """A chunk during which other Python threads of the agent took CPU (PipelineResult.
    foreign_cpu_ms) waited for the interpreter lock: counted per chunk, logged once with the
    threads' names; a chunk with a few microseconds of them is not."""
    from executor.agent import Applied
    from executor.pipeline import FOREIGN_CPU_MS, NetworkResult, PipelineResult
    from executor.realtime import Elevation
    from executor.schedule_agent import BuiltEntry, ScheduleAgent
    from planner.core.telemetry import AgentSchedule

    view = AgentSchedule.model_validate({
        "schedule_id": "sch_f", "entry": 0, "schedulable": True, "pes": [{"pe": "cpu0", "device": "cpu", "cores": 1}],
        "networks": [{"name": "A", "period_ms": 10.0, "priority": 0, "mapping": ["cpu0"]}]})
    said: list[str] = []
    agent = ScheduleAgent("http://127.0.0.1:9", "d", "", {}, [], log=said.append)
    cur = Applied(BuiltEntry(view, _Ran(Elevation(True)), 10.0, [1], ["cpu0"]), "sch_f#0", 1)

    def chunk(foreign: dict) -> None:
        res = PipelineResult("response_time", [NetworkResult("A", 1, 1, 0, 0, [4.0], [0.004], True, 1, [0], [[4.0]])],
                             0.01, False, {}, [0.004], foreign_cpu_ms=foreign)
        agent._record(cur, res, [1], 10.0)

    chunk({"agent-sender": FOREIGN_CPU_MS / 10})
    assert agent.stats.chunks_beside_threads == 0 and not said
    chunk({"agent-sender": 3.2, "agent-poller": 0.4})
    chunk({"agent-sender": 1.0})
    assert agent.stats.chunks_beside_threads == 2
    assert len(said) == 1 and "agent-sender 3.2 ms, agent-poller 0.4 ms" in said[0] and "interpreter lock" in said[0]


def test_an_entry_is_built_between_two_chunks_not_beside_one(monkeypatch):
    """The poller's build waits while a chunk holds the agent's quiet lock, and runs once the
    chunk has ended: a build beside a chunk would hold the interpreter lock its real-time
    threads need."""
    import json as _json

    from executor import schedule_agent as sa

    order: list[str] = []
    monkeypatch.setattr(sa, "build_entry", lambda *a, **k: order.append("built") or object())
    answer = {"revision": 1, "schedule": {
        "schedule_id": "sch_b", "entry": 0, "schedulable": True, "pes": [{"pe": "cpu0", "device": "cpu", "cores": 1}],
        "networks": [{"name": "A", "period_ms": 10.0, "priority": 0, "mapping": ["cpu0"]}]}}
    agent = sa.ScheduleAgent("http://127.0.0.1:9", "d", "", {}, [], log=lambda _: None)
    with agent._quiet:  # a chunk running
        poller = threading.Thread(target=agent._apply, args=(_json.dumps(answer).encode(), None))
        poller.start()
        time.sleep(0.2)
        order.append("chunk ended")
    poller.join(timeout=10)
    assert order == ["chunk ended", "built"] and agent._pending is not None
