"""Fuzz every operation of the OpenAPI schema with schemathesis: no input yields a
500, and responses match the documented status codes, content types and schemas."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from api.app import create_app
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.checks import not_a_server_error
from tests.support import docs
from tests.support.api import make_settings
from tests.support.live import LiveServer


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from api.auth import create_token

    app = create_app(make_settings(tmp_path_factory.mktemp("fuzz")))
    live_server = LiveServer(app).__enter__()
    url = live_server.url
    _, token = create_token(app.state.service.db, "fuzz", ["admin"])
    headers = {"Authorization": f"Bearer {token}"}
    # something to find: real documents, a plan, a deployment
    p = httpx.post(f"{url}/v1/platforms", json=docs.platform(), headers=headers).json()["id"]
    m = httpx.post(f"{url}/v1/profiles", json=docs.profile(), headers=headers).json()["id"]
    plan = httpx.post(f"{url}/v1/plans", json={"platform_id": p, "profile_id": m}, headers=headers).json()["id"]
    dep = httpx.post(f"{url}/v1/deployments", json={"name": "fuzzed", "platform_id": p, "profile_id": m}, headers=headers).json()["id"]
    httpx.put(f"{url}/v1/deployments/{dep}/active", json={"plan_id": plan}, headers=headers)
    yield url, headers
    live_server.__exit__()


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]

# The schema is the app's own (no server needed to collect); calls go to the live server.
schema = schemathesis.openapi.from_dict(create_app().openapi())


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_breaks_the_api(case, live):
    url, headers = live
    if case.path.endswith("/plan") and case.query:
        case.query["wait"] = 0  # the long-poll's bound is tested elsewhere; do not sleep here
    # Checked: never a 5xx, and every response documented (status, content type, headers,
    # body schema). Not checked: "schema-valid bodies are accepted" (semantic checks such as
    # unknown layer ids rightly refuse some) and "schema-violating requests are refused"
    # (unknown query parameters are ignored, as HTTP APIs do; pydantic coerces 0/1 to bool).
    case.call_and_validate(base_url=url, headers=headers, checks=CHECKS)


# Stranger values than the schema's generators make (issue 12): lone surrogates, NUL,
# huge and non-finite numbers, deep nesting, put where the documented fields go. The
# body is sent as raw JSON text (NaN, \ud800 escapes), exactly as a hostile client would.
from hypothesis import given, strategies as st  # noqa: E402

STRANGE_TEXT = st.one_of(st.sampled_from(["\ud800", "a\udfffb", "\x00", "a\x00", "\U0010ffff", "x" * 70_000, "", " ",
                                          "dep_0123", "../../etc", "%00", "\u202e"]),
                         st.text(max_size=20))
STRANGE_NUMBER = st.one_of(st.sampled_from([float("nan"), float("inf"), -float("inf"), -0.0, 1e308, 5e-324, 2**63,
                                            2**64, -(2**63) - 1, 10**30, -1, 0, True]),
                           st.integers(min_value=-(2**80), max_value=2**80), st.floats())
LEAF = st.one_of(STRANGE_TEXT, STRANGE_NUMBER, st.none())
VALUE = st.one_of(LEAF, st.recursive(LEAF, lambda c: st.lists(c, max_size=3) | st.dictionaries(STRANGE_TEXT, c, max_size=3),
                                     max_leaves=8),
                  st.integers(min_value=1, max_value=300).map(lambda n: docs_deep(n)))


def docs_deep(n: int) -> object:
    v: object = 1
    for _ in range(n):
        v = [v]
    return v


PLAN_FIELDS = ["seed", "time_limit_s", "solver", "objective", "targets", "options", "constraints", "compare_baselines",
               "reuse", "platform_id"]
LAYER_FIELDS = ["id", "op_type", "input_bytes", "output_bytes", "weight_bytes", "macs", "predecessors", "measurements"]


@given(where=st.sampled_from(["plan", "option", "profile", "layer", "platform"]), field=st.integers(0, 50), value=VALUE)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_stranger_values_never_break_the_api(live, where, field, value):
    import json

    url, headers = live
    h = {**headers, "Content-Type": "application/json"}
    p = httpx.get(f"{url}/v1/platforms", headers=headers).json()["items"][0]["id"]
    m = httpx.get(f"{url}/v1/profiles", headers=headers).json()["items"][0]["id"]
    if where in ("plan", "option"):
        body: dict = {"platform_id": p, "profile_id": m, "solver": "random" if field % 2 else "dp"}
        if where == "plan":
            body[PLAN_FIELDS[field % len(PLAN_FIELDS)]] = value
        else:
            body["options"] = {["samples", "device", "x"][field % 3]: value}
        path = "/v1/plans"
    elif where in ("profile", "layer"):
        body = docs.profile()
        if where == "layer":
            body["layers"][field % len(body["layers"])][LAYER_FIELDS[field % len(LAYER_FIELDS)]] = value
        else:
            body[["name", "source", "layers"][field % 3]] = value
        path = "/v1/profiles"
    else:
        body = docs.platform()
        body[["name", "source", "devices"][field % 3]] = value
        path = "/v1/platforms"
    r = httpx.post(f"{url}{path}", content=json.dumps(body, allow_nan=True).encode(), headers=h, timeout=60)
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        problem = r.json()
        assert problem["errors"] and all(e["path"] and e["reason"] for e in problem["errors"]), problem
    assert httpx.get(f"{url}/v1/jobs?limit=500", headers=headers).status_code == 200
