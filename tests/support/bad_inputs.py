"""The bad inputs issue 12 found answered 500 (or silently stored), as (name, method,
path, raw JSON body, expected status, expected error path). Shared by the SQLite and
PostgreSQL tests: every one must answer 4xx naming the field on both engines.

Bodies are raw text, not dicts: NaN, a lone surrogate escape and a NUL escape must
reach the service exactly as an attacker sends them."""

from __future__ import annotations

import json

from tests.support import docs


def deep(n: int, leaf: object = 1) -> object:
    v = leaf
    for _ in range(n):
        v = [v]
    return v


def plan_cases(platform_id: str, profile_id: str) -> list[tuple[str, str, str, str, int, str]]:
    base = {"platform_id": platform_id, "profile_id": profile_id}

    def plan(**kw) -> str:  # noqa: ANN003
        return json.dumps({**base, **kw})

    cases = [
        ("seed -1", plan(seed=-1), "seed"),
        ("seed 2^64", plan(seed=2**64), "seed"),
        ("samples true", plan(solver="random", options={"samples": True}), "options.samples"),
        ("samples 1e9", plan(solver="random", options={"samples": 10**9}), "options.samples"),
        ("unknown option", plan(solver="dp", options={"colour": "red"}), "options.colour"),
        ("NaN in options", plan(solver="random", options={"samples": 5}).replace("5}", "NaN}"), "options.samples"),
        ("NaN nested in options", plan(solver="test-slow", options={"duration_s": [1.5]}).replace("1.5", "NaN"),
         "options.duration_s"),
        ("NUL in options", plan(solver="preferred", options={"device": "a\x00b"}), "options.device"),
        ("surrogate in options", plan(solver="preferred", options={"device": "\ud800"}), "options.device"),
        ("big int in options", plan(solver="z3", options={"max_checks": 2**70}), "options.max_checks"),
    ]
    for depth in (240, 254, 255, 256):
        cases.append((f"options {depth} deep (brute)", plan(solver="brute", options={"x": deep(depth)}), "options.x"))
        cases.append((f"options {depth} deep (dp)", plan(options={"x": deep(depth)}), "options.x"))
    out = [(name, "POST", "/v1/plans", body, 422, path) for name, body, path in cases]
    sched = {"platform_id": platform_id, "solver": "ga", "apps": [{"profile_id": profile_id, "period_ms": 50, "priority": 0}]}
    out += [
        ("schedule seed -1", "POST", "/v1/schedules", json.dumps({**sched, "seed": -1}), 422, "seed"),
        ("schedule generations true", "POST", "/v1/schedules", json.dumps({**sched, "options": {"generations": True}}),
         422, "options.generations"),
        ("schedule options deep", "POST", "/v1/schedules", json.dumps({**sched, "options": {"x": deep(250)}}), 422,
         "options.x"),
    ]
    return out


def document_cases() -> list[tuple[str, str, str, str, int, str]]:
    def with_layer0(**kw) -> str:  # noqa: ANN003
        prof = docs.profile()
        prof["layers"][0].update(kw)
        return json.dumps(prof)

    def platform(**kw) -> str:  # noqa: ANN003
        return json.dumps({**docs.platform(), **kw})

    cases = [
        ("input_bytes 1e30", "/v1/profiles", with_layer0(input_bytes=5).replace('"input_bytes": 5', '"input_bytes": 1e30'),
         "layers[0].input_bytes"),
        ("input_bytes 2^63", "/v1/profiles", with_layer0(input_bytes=2**63), "layers[0].input_bytes"),
        ("weight_bytes 2^64", "/v1/profiles", with_layer0(weight_bytes=2**64), "layers[0].weight_bytes"),
        ("surrogate in source", "/v1/platforms", platform(source="a\ud800b"), "source"),
        ("surrogate in name", "/v1/platforms", platform(name="a\udc00"), "name"),
        ("NUL in name", "/v1/platforms", platform(name="board\x00"), "name"),
        ("NUL in source", "/v1/platforms", platform(source="\x00"), "source"),
        ("NaN in a document", "/v1/profiles", with_layer0(input_bytes=7).replace('"input_bytes": 7', '"input_bytes": NaN'),
         "layers[0].input_bytes"),
    ]
    out = [(name, "POST", path, body, 422, field) for name, path, body, field in cases]
    out.append(("NUL in deployment name", "POST", "/v1/deployments",
                json.dumps({"name": "cam\x00", "platform_id": "0" * 64, "profile_id": "0" * 64}), 422, "name"))
    return out


def check(client, headers: dict, cases) -> list[str]:  # noqa: ANN001
    """Send each case; the list of what went wrong (empty when every case is a 4xx naming its field)."""
    wrong = []
    h = {**headers, "Content-Type": "application/json"}
    for name, method, path, body, status, field in cases:
        r = client.request(method, path, content=body.encode(), headers=h)
        if r.status_code != status:
            wrong.append(f"{name}: {r.status_code} {r.text[:300]}")
            continue
        got = r.json()
        paths = [e["path"] for e in got.get("errors", [])]
        if not any(p == field or p.startswith(field + ".") or p.startswith(field + "[") for p in paths):
            wrong.append(f"{name}: expected an error at {field}, got {got.get('errors')}")
        elif not all(e["reason"] for e in got["errors"]):
            wrong.append(f"{name}: an error without a reason: {got['errors']}")
    return wrong
