"""Issue 21 findings 3, 4 and 5 as requests against the telemetry endpoints, shared by
the SQLite and PostgreSQL tests: a huge or unknown revision, NUL characters, error
counts past an INTEGER column, malformed JSON posted to another deployment, a plan of
another deployment named in errors[], implausible samples. Each must answer 4xx naming
the field (never 500, never stored), and 403 before any body check for a board posting
elsewhere. Bodies are raw text so NUL escapes and broken JSON reach the service as sent."""

from __future__ import annotations

import json

from tests.support import docs


def setup(api, tag: str) -> dict:  # noqa: ANN001
    """Deployments `{tag}-a` (the board's, plan A active at revision 1) and `{tag}-b`
    (plan B, another deployment's); a board token bound to `{tag}-a`."""
    ids = {"platform_id": api.upload("platform", docs.platform(f"{tag}-board")),
           "profile_id": api.upload("profile", docs.profile(name=f"{tag}-net"))}
    plans = []
    for objective in ("latency", "energy"):
        r = api.client.post("/v1/plans", json={**ids, "objective": objective}, headers=api.h())
        assert r.status_code in (200, 201), r.text
        plans.append(r.json())
    assert plans[0]["id"] != plans[1]["id"]
    for name, plan in zip(("a", "b"), plans):
        assert api.client.post("/v1/deployments", json={"name": f"{tag}-{name}", **ids}, headers=api.h()).status_code == 201
        r = api.client.put(f"/v1/deployments/{tag}-{name}/active", json={"plan_id": plan["id"]}, headers=api.h())
        assert r.status_code == 200, r.text
    api.token(f"{tag}-board", ["executor"], [f"{tag}-a"])
    return {"a": plans[0], "b": plans[1], "tag": tag}


def samples(plan: dict, n: int = 3, scale: float = 1.0) -> list[dict]:
    per = [s["time_ms"] * scale for s in plan["plan"]["slices"]]
    return [{"latency_ms": sum(per) * 1.01, "slice_ms": per} for _ in range(n)]


def cases(env: dict) -> list[tuple[str, str, str, int, str]]:
    """(name, deployment suffix, raw body, expected status, text the answer must contain)."""
    a, b = env["a"], env["b"]

    def batch(bid: str, **kw) -> str:  # noqa: ANN003
        body = {"batch_id": bid, "agent": "board", "plan_id": a["id"], "revision": 1, "samples": samples(a), **kw}
        return json.dumps(body)

    many = [{"kind": "other", "message": "x", "count": 10_000_000}] * 300  # 3e9 in all, past int32
    return [
        ("revision 2^70", "a", batch("r70", revision=2**70), 422, "revision"),
        ("revision 2^31", "a", batch("r31", revision=2**31), 422, "revision"),
        ("revision 2^63", "a", batch("r63", revision=2**63), 422, "revision"),
        ("unknown revision", "a", batch("r999", revision=999999), 422, "no revision 999999"),
        # an entry that cannot be this deployment's is left out and named; the batch's valid samples are kept (issue 37)
        ("error revision unknown", "a", batch("er", errors=[{"kind": "other", "message": "m", "revision": 77}]), 201,
         '"refused":[{"path":"errors[0].revision"'),
        ("error revision unknown, nothing else", "a", batch("er-only", samples=[], plan_id=None, revision=None,
                                                            errors=[{"kind": "other", "message": "m", "revision": 77}]),
         422, "errors[0].revision"),
        ("NUL in agent", "a", batch("nul-agent", agent="board\x00"), 422, "agent"),
        ("NUL in an error message", "a", batch("nul-msg", errors=[{"kind": "other", "message": "a\x00b"}]), 422,
         "errors[0].message"),
        ("surrogate in batch id", "a", batch("x").replace('"x"', '"\\ud800"'), 422, "batch_id"),
        ("error counts past int32", "a", batch("counts", samples=[], plan_id=None, revision=None, errors=many), 422,
         "errors"),
        ("malformed JSON, own deployment", "a", '{"batch_id": "m", ', 422, "not valid JSON"),
        ("malformed JSON, another deployment", "b", '{"batch_id": "m", ', 403, "may not"),
        ("NUL, another deployment", "b", batch("nul-b", agent="\x00"), 403, "may not"),
        ("deep JSON, another deployment", "b", "[" * 100 + "]" * 100, 403, "may not"),
        ("another deployment's plan in errors", "a",
         batch("foreign-err", errors=[{"kind": "build_failed", "message": "m", "plan_id": b["id"]}]), 201,
         '"refused":[{"path":"errors[0].plan_id"'),
        ("another deployment's plan, no samples", "a", batch("foreign", plan_id=b["id"], samples=[]), 422, "plan_id"),
        ("latency as a string", "a", batch("str-ms", samples=[{"latency_ms": "100", "slice_ms": []}]), 422,
         "samples[0].latency_ms"),
        ("latency as true", "a", batch("true-ms", samples=[{"latency_ms": True, "slice_ms": []}]), 422,
         "samples[0].latency_ms"),
        ("a count as a string", "a", batch("str-count", errors=[{"kind": "other", "message": "m", "count": "2"}]), 422,
         "errors[0].count"),
        ("a slice time as true", "a", batch("true-slice", samples=[{**samples(a, 1)[0], "slice_ms": [True] * len(
            samples(a, 1)[0]["slice_ms"])}]), 422, "slice_ms"),
        ("1e308 ms", "a", batch("huge", samples=[{"latency_ms": 1e308, "slice_ms": []}]), 422, "latency_ms"),
        ("10^4 x the prediction", "a", batch("slow", samples=samples(a, scale=1e4)), 422, "implausible"),
        ("10^-6 x the prediction", "a", batch("fast", samples=samples(a, scale=1e-6)), 422, "implausible"),
        ("slice count of another plan", "a",
         batch("slices", samples=[{"latency_ms": 5.0, "slice_ms": [1.0] * (len(a["plan"]["slices"]) + 1)}]), 422,
         "slice_ms"),
    ]


def check(api, env: dict) -> list[str]:  # noqa: ANN001
    """What went wrong (empty: every case answered as it must, and nothing but the plausible
    batch and the valid samples of the two with a refused error entry was stored)."""
    tag = env["tag"]
    wrong = []
    headers = {**api.h(f"{tag}-board"), "Content-Type": "application/json"}
    for name, dep, body, status, needle in cases(env):
        r = api.client.post(f"/v1/deployments/{tag}-{dep}/telemetry", content=body.encode(), headers=headers)
        if r.status_code != status or needle not in r.text:
            wrong.append(f"{name}: {r.status_code} {r.text[:300]}")
    ok = json.dumps({"batch_id": "fine", "agent": "board", "plan_id": env["a"]["id"], "revision": 1,
                     "samples": samples(env["a"])})
    r = api.client.post(f"/v1/deployments/{tag}-a/telemetry", content=ok.encode(), headers=headers)
    if r.status_code != 201:
        wrong.append(f"a plausible batch: {r.status_code} {r.text[:300]}")
    s = api.client.get(f"/v1/deployments/{tag}-a/telemetry", headers=api.h())
    if s.status_code != 200 or s.json()["batches"] != 3 or env["b"]["id"] in s.text or "\\u0000" in s.text:
        wrong.append(f"the summary holds more than the plausible batch: {s.status_code} {s.text[:500]}")
    return wrong
