"""Issue 21, under load: work that can take long never runs on the event loop, and the
loop's per-request checks stay exact when they take a shortcut."""

from __future__ import annotations

import asyncio
import json

import pytest

from api.bodies import parse_json
from api.problems import ApiError
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("under-load"), token_cache_s=60.0)
    yield a
    a.client.__exit__(None, None, None)


def test_a_token_not_in_the_cache_is_looked_up_off_the_event_loop(api, monkeypatch):
    """A database query per unseen token (an attacker's random ones never repeat) ran on
    the event loop, holding up every other request for its round trip."""
    auth = api.service.auth
    on_loop: list[bool] = []
    real = auth.lookup

    def lookup(secret: str):  # noqa: ANN202
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return real(secret)

    monkeypatch.setattr(auth, "lookup", lookup)
    fresh = api.token("under-load-fresh", ["pipeline"])
    assert api.client.get("/v1/plans", headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
    unknown = api.client.get("/v1/plans", headers={"Authorization": "Bearer not-a-token-anyone-has"})
    assert unknown.status_code == 401 and unknown.json()["errors"][0]["path"] == "header.authorization"
    assert on_loop == [False, False]
    # cached now, both answers: no further lookup
    assert api.client.get("/v1/plans", headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
    assert api.client.get("/v1/plans", headers={"Authorization": "Bearer not-a-token-anyone-has"}).status_code == 401
    assert on_loop == [False, False]


@pytest.mark.parametrize("body, path, words", [
    (b"[" * 9 + b"]" * 9, "<root>", "nested 9 levels deep"),  # short, but deeper than the limit
    (json.dumps({"a": {"b": [[[[[[[1]]]]]]]}}).encode(), "a.b", "nested 9 levels deep"),
    (b'{"s": "' + b"x" * 40 + b'"}', "<body>", "longer than the service's limit of 32 bytes"),
    (b'{"x": NaN}', "x", "not a JSON number"),
    (b'{"x": "a\\u0000b"}', "x", "NUL"),
    (b'{"x": "\\ud800"}', "x", "surrogate"),
])
def test_short_bodies_skip_the_scan_and_keep_every_refusal(body, path, words):
    """parse_json skips its regex-and-numpy scan when no string can be over the limit and
    all the body's brackets together are within the depth limit; what it refuses is the
    same (limits here: depth 8, strings 32 bytes)."""
    with pytest.raises(ApiError) as err:
        parse_json(body, 8, 32)
    assert err.value.errors[0].path == path and words in err.value.errors[0].reason, err.value.errors


def test_short_bodies_parse_as_before():
    body = json.dumps({"platform_id": "p" * 20, "options": {"k": [1, 2, {"z": "\\u00e9"}]}}).encode()
    assert parse_json(body, 8, 64) == json.loads(body)
    assert parse_json(body, 8, 24) == json.loads(body)  # the body longer than the string limit: the scan runs, finds none too long
