"""The web UI obeys the API's limits (issue 21, finding 8): a session's pages count against
its token's request rate and requests in flight (one limiter for /v1 and /ui), and the
frontier, a process per request, runs at most PLANNER_WORKERS at once: beyond, 503
with Retry-After, and no process is started."""

from __future__ import annotations

import re

from tests.support import docs
from tests.support.api import start


def login(api, who: str = "pipeline") -> None:
    form = api.client.get("/ui/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
    r = api.client.post("/ui/login", data={"token": api.tokens[who], "csrf": csrf, "next": "/ui"}, follow_redirects=False)
    assert r.status_code == 303, r.text


def token_id(api, who: str = "pipeline") -> str:
    return api.service.auth.lookup(api.tokens[who]).token_id


def test_ui_pages_count_against_the_tokens_rate(tmp_path):
    api = start(tmp_path, rate_per_s=0.01, rate_burst=3)
    try:
        login(api)  # the login form is open: it counts against nothing
        assert [api.client.get("/ui/plans").status_code for _ in range(3)] == [200, 200, 200]
        r = api.client.get("/ui/plans")
        assert r.status_code == 429, r.text[:300]  # before the fix: 200 however fast a browser asked
        assert "PLANNER_RATE_PER_S" in r.text and int(r.headers["retry-after"]) >= 1
        assert "text/html" in r.headers["content-type"]  # a page saying so, for people
        # one bucket for the token: its API calls are over the rate too
        assert api.client.get("/v1/plans", headers=api.h()).status_code == 429
        assert api.client.get("/ui/login").status_code == 200
    finally:
        api.client.__exit__(None, None, None)


def test_ui_pages_count_against_the_tokens_requests_in_flight(tmp_path):
    api = start(tmp_path, max_in_flight=1)
    try:
        login(api)
        assert api.client.get("/ui/plans").status_code == 200
        limiter = api.client.app.state.limiter
        assert limiter.enter(token_id(api)) is None  # as if one API call of this token were being served
        try:
            r = api.client.get("/ui/plans")
            assert r.status_code == 429 and "PLANNER_MAX_IN_FLIGHT" in r.text, r.text[:300]
            r = api.client.post("/ui/plans", data={"csrf": "x"})
            assert r.status_code == 429  # a form that starts work is refused before it runs
        finally:
            limiter.leave(token_id(api))
        assert api.client.get("/ui/plans").status_code == 200
        assert limiter.buckets[token_id(api)].in_flight == 0  # every page gave its slot back
    finally:
        api.client.__exit__(None, None, None)


def test_frontiers_beyond_the_worker_count_are_refused_before_a_process_starts(tmp_path, monkeypatch):
    from api.routers import ui

    api = start(tmp_path, workers=1)
    started = []
    real = ui._frontier_process
    monkeypatch.setattr(ui, "_frontier_process", lambda *a: started.append(a) or real(*a))
    try:
        p, m = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
        login(api)
        url = f"/ui/frontier?platform_id={p}&profile_id={m}&max_transitions=1"
        slots = api.client.app.state.frontier_slots
        assert slots.size == 1
        assert slots.take()  # one frontier is being computed
        try:
            r = api.client.get(url)
            assert r.status_code == 503 and "PLANNER_WORKERS" in r.text, r.text[:300]
            assert int(r.headers["retry-after"]) >= 1 and not started
        finally:
            slots.give()
        r = api.client.get(url)
        assert r.status_code == 200, r.text[:500]
        assert len(started) == 1 and slots.used == 0
        assert started[0][4] is not None and started[0][5] == api.settings.worker_memory_mb  # dies with us, memory-capped
    finally:
        api.client.__exit__(None, None, None)


def test_a_large_documents_page_is_paged_and_rendered_off_the_event_loop(tmp_path):
    """A 390-layer profile's page (issue 21: a 5000-layer profile's page rendered 0.9 MB on
    the event loop in 0.5-1.8 s, every other request waiting): the layer table shows 200
    rows a page with links to the others, and every page is rendered on a worker thread,
    never on the loop's."""
    import threading

    from api.routers import ui

    api = start(tmp_path)
    try:
        login(api)
        pid = api.upload("profile", docs.profile(390, name="long"))
        threads: list[str] = []
        real = ui.templates.TemplateResponse

        def spy(*a, **kw):  # noqa: ANN002, ANN003, ANN202
            threads.append(threading.current_thread().name)
            return real(*a, **kw)

        ui.templates.TemplateResponse = spy
        try:
            first = api.client.get(f"/ui/profiles/{pid}")
            last = api.client.get(f"/ui/profiles/{pid}?layers=200")
            plans = api.client.get("/ui/plans")
        finally:
            ui.templates.TemplateResponse = real
        assert first.status_code == last.status_code == plans.status_code == 200
        assert len(threads) == 3 and all(name.startswith("AnyIO worker thread") for name in threads), threads
        assert "layers 1&ndash;200 of 390" in first.text and 'href="?layers=200"' in first.text
        assert first.text.count('<tr><td class="num">') == 200 and '"num">200</td>' in first.text
        assert "layers 201&ndash;390 of 390" in last.text and 'href="?layers=0"' in last.text
        assert last.text.count('<tr><td class="num">') == 190 and '"num">201</td>' in last.text
    finally:
        api.client.__exit__(None, None, None)


def test_the_frontier_page_parses_no_document_in_the_service(tmp_path, monkeypatch):
    """Issue 21: /ui/frontier parsed the whole platform and profile on a service thread (the
    GIL held: the event loop stalled) to count cells, then wrote both out again for the
    frontier process. The cell count now comes from the documents' stored summaries and
    the frontier process reads the documents itself; the page and refusals are the same."""
    import re

    from api.routers import ui
    from planner.core.schema import ModelProfile, Platform

    def strip(html: str) -> str:  # what differs between two renders of one frontier
        html = re.sub(r'name="csrf" value="[^"]*"', "", html)
        return re.sub(r"computed in [0-9.]+ ms", "", html)

    api = start(tmp_path, workers=1)
    try:
        p, m = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
        login(api)
        url = f"/ui/frontier?platform_id={p}&profile_id={m}&max_transitions=1"
        before = api.client.get(url)
        assert before.status_code == 200, before.text[:500]

        def in_the_service(*a, **kw):  # noqa: ANN002, ANN003, ANN202
            raise AssertionError("the frontier page parsed a document in the service's process")

        monkeypatch.setattr(ui, "doc", in_the_service)
        monkeypatch.setattr(api.service, "document_body", in_the_service)
        monkeypatch.setattr(api.service.planner, "parsed", in_the_service)
        monkeypatch.setattr(Platform, "model_validate_json", in_the_service)
        monkeypatch.setattr(ModelProfile, "model_validate_json", in_the_service)
        after = api.client.get(url)
        assert after.status_code == 200, after.text[:500]
        assert strip(after.text) == strip(before.text) and "fig-frontier" in after.text
        # unknown documents: 404 naming them, as before
        for q, needle in ((f"platform_id={'0' * 64}&profile_id={m}", "no platform with id"),
                          (f"platform_id={p}&profile_id={'0' * 64}", "no profile with id"),
                          (f"platform_id={m}&profile_id={p}", "no platform with id")):
            r = api.client.get(f"/ui/frontier?{q}&max_transitions=1")
            assert r.status_code == 404 and needle in r.text, r.text[:300]
        # too many cells: refused from the summaries, before a process starts
        started = []
        real = ui._frontier_process
        monkeypatch.setattr(ui, "_frontier_process", lambda *a: started.append(a) or real(*a))
        monkeypatch.setattr(ui, "MAX_FRONTIER_CELLS", 5)
        r = api.client.get(url)
        assert r.status_code == 422 and "cells exceed the UI&#39;s frontier limit of 5" in r.text, r.text[:300]
        assert not started
        # a summary without the counts (stored by an older version): the frontier process checks
        from sqlalchemy import update

        from api.rows import DocumentRow

        with api.service.db.session() as s:
            s.execute(update(DocumentRow).where(DocumentRow.id == m).values(summary="{}"))
        r2 = api.client.get(url)
        assert r2.status_code == 422 and len(started) == 1, r2.text[:300]
        assert re.sub(r'name="csrf" value="[^"]*"', "", r2.text) == re.sub(r'name="csrf" value="[^"]*"', "", r.text)
    finally:
        api.client.__exit__(None, None, None)


def test_the_frontier_process_is_spawned_not_forked(tmp_path, monkeypatch):
    """The frontier process was declared with pebble's `mp_context=`, a keyword pebble
    ignores (it reads `context`): it was forked from the multi-threaded service, locks and
    all. Spawned, it sees nothing the service's process changed after it started."""
    import planner.frontier

    api = start(tmp_path, workers=1)
    try:
        p, m = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
        login(api)

        def forked(*a, **kw):  # noqa: ANN002, ANN003, ANN202
            raise AssertionError("the frontier ran in a fork of the service's process")

        monkeypatch.setattr(planner.frontier, "frontier_report", forked)
        r = api.client.get(f"/ui/frontier?platform_id={p}&profile_id={m}&max_transitions=1")
        assert r.status_code == 200 and "fig-frontier" in r.text, r.text[:500]
    finally:
        api.client.__exit__(None, None, None)
