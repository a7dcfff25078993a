"""The UI's list pages whose rows refer to documents by id (plans, schedules, deployments)
show those documents' names (api.routers.ui.named_listing), not ids or '?'."""

from __future__ import annotations

import numpy as np

from tests import schedule_instances as si
from tests.support import docs
from tests.support.api import start
from tests.test_ui_sessions import login


def test_list_pages_name_the_documents_their_rows_refer_to(tmp_path):
    api = start(tmp_path)
    try:
        c = api.client
        pid = api.upload("platform", docs.platform(name="listing-board"))
        mid = api.upload("profile", docs.profile(name="listing-net"))
        r = c.post("/v1/plans", json={"platform_id": pid, "profile_id": mid}, headers=api.h())
        assert r.status_code in (200, 201), r.text
        r = c.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profile_id": mid}, headers=api.h())
        assert r.status_code == 201, r.text
        rng = np.random.default_rng(7)
        kang = si.platform(rng).model_dump(mode="json", exclude_none=True)
        kang["name"] = "listing-cluster"
        sid = api.upload("platform", kang)
        aid = api.upload("profile", si.profile(rng, "A", 4).model_dump(mode="json", exclude_none=True))
        r = c.post("/v1/schedules", json={"platform_id": sid, "solver": "exhaustive",
                                          "apps": [{"profile_id": aid, "period_ms": 60.0, "priority": 0}]},
                   headers=api.h())
        assert r.status_code == 202, r.text
        assert api.wait_job(r.json()["id"])["state"] == "succeeded"
        login(c, api.tokens["pipeline"])
        for path, shown in [("/ui/plans", "listing-net on listing-board"), ("/ui/deployments", "listing-net on listing-board"),
                            ("/ui/schedules", "listing-cluster")]:
            page = c.get(path)
            assert page.status_code == 200 and shown in page.text, (path, page.text[:500])
    finally:
        c.__exit__(None, None, None)
