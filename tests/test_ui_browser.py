"""The web UI in headless Chromium (offline: every host but the service's is
unresolvable): logging in with a token, every listing page, the plan, frontier,
schedule, compare, job and deployment pages with their figures drawn (non-empty SVG
with the expected marks), and a plan requested from the form. Screenshots of the
plan, frontier and schedule pages go to the test's tmp folder (printed), or to
$UI_SCREENSHOTS when set; never into the repository."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from api.auth import create_token
from tests.support.api import make_settings
from tests.support.browser import Browser
from tests.support.docs import ROOT
from tests.support.live import LiveServer

PROFILES = ROOT / "profiles"


def load(rel: str) -> dict:
    return json.loads((PROFILES / rel).read_text())


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A live service with a pipeline token, documents uploaded, two plans, a finished
    schedule job and a deployment with two revisions."""
    app = create_app(make_settings(tmp_path_factory.mktemp("ui")))
    with LiveServer(app) as server:
        _, token = create_token(app.state.service.db, "ui-test", ["pipeline"])
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as api:
            def up(kind: str, rel: str) -> str:
                r = api.post(f"/v1/{kind}s", json=load(rel))
                assert r.status_code in (200, 201), r.text
                return r.json()["id"]

            ids = {"hikey": up("platform", "platforms/hikey970.json"), "mobilenet": up("profile", "models/mobilenet_v2_1.4.json"),
                   "xavier": up("platform", "platforms/xavier_agx.json"), "vgg": up("profile", "models/vgg19_unfused.json"),
                   "s9": up("platform", "platforms/galaxy_s9.json"), "sq": up("profile", "models/squeezenet_s9.json"),
                   "v1": up("profile", "models/mobilenet_v1_s9.json")}
            plans = []
            for objective in ("energy", "latency"):
                r = api.post("/v1/plans", json={"platform_id": ids["hikey"], "profile_id": ids["mobilenet"],
                                                "objective": objective})
                assert r.status_code in (200, 201), r.text
                plans.append(r.json()["id"])
            r = api.post("/v1/schedules", json={
                "platform_id": ids["s9"], "devices": ["cpu", "gpu"], "seed": 1, "timelines": "first",
                "cpu_partitions": {"cpu": [[1, 1, 1, 1]]}, "options": {"generations": 6, "population": 16},
                "apps": [{"profile_id": ids["sq"], "period_ms": 33, "priority": 0},
                         {"profile_id": ids["v1"], "period_ms": 40, "priority": 1}]})
            assert r.status_code == 202, r.text
            ids["schedule_job"] = r.json()["id"]
            r = api.post("/v1/deployments", json={"name": "camera", "platform_id": ids["hikey"], "profile_id": ids["mobilenet"]})
            assert r.status_code == 201, r.text
            for p in plans:
                assert api.put("/v1/deployments/camera/active", json={"plan_id": p}).status_code == 200
        shots = Path(os.environ["UI_SCREENSHOTS"]) if os.environ.get("UI_SCREENSHOTS") else tmp_path_factory.mktemp("screenshots")
        shots.mkdir(parents=True, exist_ok=True)
        with Browser(tmp_path_factory.mktemp("chromium")) as browser:
            yield {"url": server.url, "token": token, "ids": ids, "plans": plans, "browser": browser, "shots": shots}
        print(f"\nUI screenshots: {shots}")


def logged_in(site) -> Browser:
    """The browser with the token entered once in the login form (kept in the session)."""
    b = site["browser"]
    if not site.get("logged_in"):
        b.goto(f"{site['url']}/ui/plans")
        assert "/ui/login" in b.url()  # the UI asks for the token first
        b.eval(f"document.querySelector('input[name=token]').value = {json.dumps(site['token'])}; "
               "document.querySelector('form[action=\"/ui/login\"]').submit(); true")
        b.wait_for("location.pathname === '/ui/plans' && document.readyState === 'complete'", what="redirect after login")
        site["logged_in"] = True
    return b


MARKS_JS = """(() => {
  const svg = document.querySelector(%s + ' svg');
  if (!svg) return null;
  const n = (sel) => svg.querySelectorAll(sel).length;
  return {rect: n('g.mark-rect.role-mark > path'), symbol: n('g.mark-symbol.role-mark > path'),
          line: n('g.mark-line.role-mark > path'), rule: n('g.mark-rule.role-mark > line'),
          text: svg.textContent, width: svg.getBoundingClientRect().width};
})()"""


def drawn(b: Browser, fig_id: str) -> dict:
    """Wait for vega-embed to draw the figure; its SVG's data marks and text."""
    b.wait_for(f"document.getElementById('{fig_id}-view').dataset.drawn", what=f"figure {fig_id}")
    assert not b.console, b.console  # vega(-lite) warns on a spec it had to guess at
    assert b.eval(f"document.getElementById('{fig_id}-view').dataset.drawn") == "yes", b.eval(
        f"document.getElementById('{fig_id}-view').textContent")
    marks = b.eval(MARKS_JS % json.dumps(f"#{fig_id}-view"))
    assert marks and marks["width"] > 300, marks
    return marks


def test_login_is_required_and_a_bad_token_refused(site):
    r = httpx.get(f"{site['url']}/ui/plans", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
    with httpx.Client(base_url=site["url"]) as c:
        form = c.get("/ui/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
        r = c.post("/ui/login", data={"token": "hp_wrong", "csrf": csrf, "next": "/ui"})
        assert r.status_code == 401 and "unknown or revoked" in r.text
        r = c.post("/ui/login", data={"token": site["token"], "csrf": "forged", "next": "/ui"})
        assert r.status_code == 403


def test_listing_pages_render(site):
    b = logged_in(site)
    for path, needle in [("/ui", "Model profiles"), ("/ui/platforms", "hikey970"), ("/ui/profiles", "VGG-19"),
                         ("/ui/plans", "N1@960"), ("/ui/jobs", site["ids"]["schedule_job"]),
                         ("/ui/deployments", "camera"), (f"/ui/platforms/{site['ids']['xavier']}", "dla0"),
                         (f"/ui/profiles/{site['ids']['mobilenet']}", "layers")]:
        b.goto(site["url"] + path)
        text = b.eval("document.body.innerText")
        assert needle in text, (path, text[:500])
        assert "Traceback" not in text and "Internal Server Error" not in text
    # no page asks for anything but the service itself
    assert b.eval("[...document.querySelectorAll('script[src],link[href]')].every(e => "
                  "(e.src || e.href).startsWith(location.origin))")


def test_plan_requested_from_the_form(site):
    """The form, an energy cap on Xavier: the plan page draws the layer strip (a cell per
    layer), the per-slice bars and the alternatives, violators told apart."""
    b = logged_in(site)
    ids = site["ids"]
    b.goto(f"{site['url']}/ui/plans/new")
    b.eval(f"""(() => {{
      const f = document.getElementById('plan-form');
      f.platform_id.value = {json.dumps(ids['xavier'])}; f.profile_id.value = {json.dumps(ids['vgg'])};
      f.objective.value = 'latency'; f.solver.value = 'pareto'; f.devices.value = 'gpu,dla0';
      f.max_energy_mj.value = '170'; f.max_transitions.value = '3';
      document.getElementById('plan-submit').click(); return true; }})()""")
    b.wait_for("/^\\/ui\\/plans\\/pln_/.test(location.pathname) && document.readyState === 'complete'", what="the new plan")
    marks = drawn(b, "fig-plan")
    assert marks["rect"] >= 43 + 2 * 4  # 43 layer cells, slice outlines and bars
    assert marks["symbol"] >= 3  # the plan and its alternatives
    assert "breaks the request" in marks["text"] and "meets the request" in marks["text"]
    text = b.eval("document.body.innerText")
    assert "exceeds max_energy_mj = 170" in text
    plan_id = b.eval("location.pathname.split('/').pop()")
    site["form_plan"] = plan_id
    doc = b.eval("fetch(location.pathname + '/json').then(r => r.json())")  # the JSON link, with the session
    assert doc["id"] == plan_id and doc["request"]["constraints"]["max_energy_mj"] == 170
    b.screenshot(site["shots"] / "plan.png")


def test_form_errors_name_the_field(site):
    b = logged_in(site)
    ids = site["ids"]
    b.goto(f"{site['url']}/ui/plans/new")
    b.eval(f"""(() => {{
      const f = document.getElementById('plan-form');
      f.platform_id.value = {json.dumps(ids['hikey'])}; f.profile_id.value = {json.dumps(ids['mobilenet'])};
      f.max_energy_mj.value = '-5'; f.seed.value = 'x';
      document.getElementById('plan-submit').click(); return true; }})()""")
    b.wait_for("!!document.getElementById('form-errors')", what="the form's errors")
    errors = b.eval("document.getElementById('form-errors').innerText")
    assert "constraints.max_energy_mj" in errors and "seed" in errors
    assert b.eval("document.getElementById('plan-form').max_energy_mj.value") == "-5"  # the input is kept


def test_frontier_page(site):
    b = logged_in(site)
    ids = site["ids"]
    b.goto(f"{site['url']}/ui/frontier?platform_id={ids['xavier']}&profile_id={ids['vgg']}&max_transitions=3"
           "&energy_cap_mj=170&devices=gpu,dla0")
    marks = drawn(b, "fig-frontier")
    assert marks["line"] >= 2 and marks["symbol"] >= 10
    assert "chosen: " in marks["text"] and "energy-cap sweep" in marks["text"]
    if site.get("form_plan"):  # the chosen point is the plan the form made under the same cap
        notation = httpx.get(f"{site['url']}/v1/plans/{site['form_plan']}",
                             headers={"Authorization": f"Bearer {site['token']}"}).json()["plan"]["notation"]
        chosen = b.eval("document.querySelector('.meta .notation').textContent")
        assert re.sub(r"@[0-9.]+", "", notation) == chosen
    b.screenshot(site["shots"] / "frontier.png")


def children() -> set[int]:
    """Live direct child processes of this one (the LiveServer runs in this process)."""
    me, out = os.getpid(), set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                out.add(int(d.name))
    return out


def test_frontier_past_its_time_limit_is_stopped(site, monkeypatch):
    """A frontier that takes too long is killed and the page says what to change."""
    import time

    from api.routers import ui

    monkeypatch.setattr(ui, "FRONTIER_TIMEOUT_S", 0.05)
    before = children()
    b = logged_in(site)
    ids = site["ids"]
    b.goto(f"{site['url']}/ui/frontier?platform_id={ids['xavier']}&profile_id={ids['vgg']}&max_transitions=8")
    text = b.eval("document.body.innerText")
    assert "took longer than the UI's 0.05 s" in text and "max_transitions" in text
    deadline = time.monotonic() + 20
    while children() - before:
        assert time.monotonic() < deadline, f"the frontier process outlived its time limit: {children() - before}"
        time.sleep(0.2)


def test_job_progress_then_schedule_page(site):
    b = logged_in(site)
    job = site["ids"]["schedule_job"]
    b.goto(f"{site['url']}/ui/jobs/{job}")
    state = b.wait_for("document.getElementById('job').dataset.finished", timeout_s=120, what="the job to finish")
    assert state == "succeeded", b.eval("document.getElementById('job').innerText")
    assert b.eval("document.getElementById('job-progress').value") == 1
    b.eval("document.getElementById('job-link').click(); true")
    b.wait_for("location.pathname.startsWith('/ui/schedules/sch_') && document.readyState === 'complete'")
    marks = drawn(b, "fig-schedule")
    assert marks["rect"] >= 39 + 28  # one bar per layer of each network on the timeline
    assert marks["rule"] >= 2  # the two deadlines
    assert marks["symbol"] >= 2 and "per-PE timeline" in marks["text"] and "Pareto set" in marks["text"]
    b.screenshot(site["shots"] / "schedule.png")


def test_compare_two_plans(site):
    b = logged_in(site)
    b.goto(f"{site['url']}/ui/plans")
    b.eval("document.getElementById('compare-form').submit(); true")
    b.wait_for("location.pathname === '/ui/compare' && document.readyState === 'complete'")
    for fig in ("fig-a", "fig-b"):
        assert drawn(b, fig)["rect"] >= 18
    text = b.eval("document.body.innerText")
    assert "latency (ms)" in text and "energy (mJ)" in text and "b vs a" in text
    b.screenshot(site["shots"] / "compare.png")


def test_deployment_page(site):
    b = logged_in(site)
    b.goto(f"{site['url']}/ui/deployments")
    b.eval("document.querySelector('a[href^=\"/ui/deployments/dep_\"]').click(); true")
    b.wait_for("location.pathname.startsWith('/ui/deployments/dep_') && document.readyState === 'complete'")
    marks = drawn(b, "fig-deployment")
    assert marks["symbol"] == 2 and "no telemetry yet" in marks["text"] and "r2" in marks["text"]


def test_missing_plan_is_an_html_404(site):
    b = logged_in(site)
    b.goto(f"{site['url']}/ui/plans/pln_missing")
    assert "no plan with id pln_missing" in b.eval("document.body.innerText")
