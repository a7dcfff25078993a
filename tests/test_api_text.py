"""The service's answers a newcomer can read (issue 13): 415 saying what to send,
gzip, schedules summarised by default with entries paged and timelines on request,
plural Swagger summaries, a health response with a real schema."""

from __future__ import annotations


import numpy as np
import pytest

from tests import schedule_instances as si
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("text"))
    yield a
    a.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def schedule(api):
    rng = np.random.default_rng(7)
    ids = {k: api.upload("platform" if k == "platform" else "profile", d.model_dump(mode="json", exclude_none=True))
           for k, d in {"platform": si.platform(rng), "a": si.profile(rng, "A", 4), "b": si.profile(rng, "B", 4)}.items()}
    body = {"platform_id": ids["platform"], "solver": "exhaustive",
            "apps": [{"profile_id": ids["a"], "period_ms": 60.0, "priority": 0},
                     {"profile_id": ids["b"], "period_ms": 80.0, "priority": 1}]}
    done = api.wait_job(api.client.post("/v1/schedules", json=body, headers=api.h()).json()["id"])
    assert done["state"] == "succeeded", done
    return done


def test_wrong_content_type_is_415_saying_what_to_send(api):
    r = api.client.post("/v1/platforms", content=b"name=x", headers=api.h(**{"Content-Type": "application/x-www-form-urlencoded"}))
    assert r.status_code == 415, r.text
    body = r.json()
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "Content-Type: application/json" in body["detail"] and "application/x-www-form-urlencoded" in body["detail"]
    assert body["errors"][0]["path"] == "header.content-type"
    r = api.client.post("/v1/platforms", content=b'{"name": "x"}', headers=api.h())  # no Content-Type at all
    assert r.status_code == 415 and "no Content-Type" in r.json()["detail"]
    r = api.client.post("/v1/platforms", content=b'{"name": "x"}', headers=api.h(**{"Content-Type": "application/json; charset=utf-8"}))
    assert r.status_code == 422  # JSON: validated as usual


def test_large_answers_are_gzipped_when_asked(api, schedule):
    url = f"/v1/schedules/{schedule['schedule_id']}?view=entries&limit=1000&timelines=true"
    plain = api.client.get(url, headers=api.h(**{"Accept-Encoding": "identity"}))
    zipped = api.client.get(url, headers=api.h(**{"Accept-Encoding": "gzip"}))
    assert plain.headers.get("content-encoding") is None
    assert zipped.headers["content-encoding"] == "gzip" and zipped.json() == plain.json()
    assert int(zipped.headers["content-length"]) < len(plain.content) / 3


def test_schedule_is_a_summary_by_default_with_pages_and_timelines_on_request(api, schedule):
    sid = schedule["schedule_id"]
    full = api.client.get(f"/v1/schedules/{sid}?view=entries&limit=1000&timelines=true", headers=api.h()).json()
    entries = full["schedule"]["entries"]
    assert len(entries) >= 2 and entries[0]["timeline"] is not None
    res = api.client.get(f"/v1/schedules/{sid}", headers=api.h()).json()
    digest = res["summary"]
    assert digest["view"] == "summary" and digest["stored_entries"] == len(entries)
    assert digest["objective_names"] == full["schedule"]["objective_names"]
    for k, b in enumerate(digest["best"]):
        assert b["objective"] == digest["objective_names"][k]
        assert b["value"] == min(e["objectives"][k] for e in entries)
        assert entries[b["entry"]]["objectives"][k] == b["value"]
    assert len(res["schedule"]["entries"]) == len({b["entry"] for b in digest["best"]})
    assert all(e["timeline"] is None for e in res["schedule"]["entries"])
    page = api.client.get(f"/v1/schedules/{sid}?view=entries&offset=1&limit=1", headers=api.h()).json()
    assert page["summary"]["offset"] == 1 and len(page["schedule"]["entries"]) == 1
    assert page["schedule"]["entries"][0]["objectives"] == entries[1]["objectives"]
    assert api.client.get(f"/v1/jobs/{schedule['id']}/result", headers=api.h()).json()["summary"] == digest
    bad = api.client.get(f"/v1/schedules/{sid}?view=everything", headers=api.h())
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "query.view"


def test_openapi_reads_well(api):
    spec = api.client.get("/openapi.json").json()
    summaries = [op["summary"] for path in spec["paths"].values() for op in path.values()]
    assert "List platforms" in summaries and "List AsyMo networks" in summaries and "List model profiles" in summaries
    assert not [s for s in summaries if s.startswith(("List a ", "List an "))]
    health = spec["paths"]["/v1/health"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert health == {"$ref": "#/components/schemas/Health"}
    assert spec["components"]["schemas"]["Health"]["examples"] == [{"status": "ok"}]
    params = {p["name"] for p in spec["paths"]["/v1/schedules/{schedule_id}"]["get"]["parameters"]}
    assert {"view", "offset", "limit", "timelines"} <= params
    assert api.client.get("/v1/health").json() == {"status": "ok"}
