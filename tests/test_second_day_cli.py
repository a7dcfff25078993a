"""The CLI's words on a new user's second day (issue 38): `planner solve`'s header labels
the solver's time (it read as the plan's latency), and `planner deploy --verify K`
announces the verification it leaves pending on the board."""

from __future__ import annotations

import json

import pytest

from tests.support import docs
from tests.support.api import start
from tests.support.cli import run


def test_the_solve_header_labels_the_solver_time(tmp_path, capsys):
    (tmp_path / "p.json").write_text(json.dumps(docs.platform()))
    (tmp_path / "m.json").write_text(json.dumps(docs.profile()))
    code, out, err = run(capsys, "solve", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "m.json"))
    assert code == 0, err
    header = out.splitlines()[0]
    assert "(optimal, solver time " in header and header.endswith(" ms)"), header


@pytest.fixture
def api(tmp_path):
    a = start(tmp_path / "data")
    yield a
    a.client.__exit__(None, None, None)


def test_deploy_with_verify_announces_the_pending_verification(api, monkeypatch, capsys):
    from planner_cli.commands import client

    def init(self, server, token):  # noqa: ANN001 - the in-process service's own client (its loop runs the plan workers)
        self.server, self.token = server, token
        api.client.headers["Authorization"] = f"Bearer {token}"
        self.http = api.client

    monkeypatch.setattr(client.Client, "__init__", init)
    pid, mid = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
    plan_id = api.client.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "compare_baselines": False},
                              headers=api.h()).json()["id"]
    code, out, err = run(capsys, "deploy", "--token", api.tokens["pipeline"], "--deployment", "cam", "--plan", plan_id,
                         "--verify", "2", "--verify-runs", "5")
    assert code == 0, err
    assert "verification pending:" in out and "2 next-best candidate(s)" in out and "5 runs each" in out, out
    assert "/v1/deployments/cam/verification" in out
