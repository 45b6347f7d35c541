"""Round trips through the real LiteLLM proxy (one per module) to a fake upstream:
byte identity, key substitution, recorder output, errors, isolation of runs, translation."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from typing import Any

import httpx
import pytest
from gateway_helpers import ABSENT_KEY_ENV, UPSTREAM_KEY, fixture_bytes, start_gateway

from apparatus.gateway import Gateway, GatewayError
from apparatus.gateway.fake_upstream import Captured, FakeUpstream
from apparatus.gateway.records import RequestRecord

#: One proxy start per module (~6 s, ~12 s on a loaded 2-core machine); >30 s in total.
pytestmark = pytest.mark.slow

API_PATH = {"anthropic": "/v1/messages", "responses": "/responses", "chat": "/chat/completions"}
EXPECTED_USAGE = {
    "anthropic": {"input_tokens": 23, "output_tokens": 3, "cache_read_tokens": 7, "cache_write_tokens": 5,
                  "reasoning_tokens": None},
    "responses": {"input_tokens": 20, "output_tokens": 6, "cache_read_tokens": 4, "cache_write_tokens": None,
                  "reasoning_tokens": 2},
    "chat": {"input_tokens": 30, "output_tokens": 5, "cache_read_tokens": 8, "cache_write_tokens": None,
             "reasoning_tokens": 1},
}


def body_for(wire: str, model: str, *, stream: bool, marker: str = "hello") -> bytes:
    """A small request in ``wire``, serialized in an unusual but valid way (spacing, key
    order, a float, unicode) that any re-encoding would change."""
    if wire == "anthropic":
        obj: dict[str, Any] = {"model": model, "max_tokens": 64, "metadata": {"user_id": "u-1"},
                               "tools": [{"name": "Bash", "description": "Run", "input_schema": {"type": "object"}}],
                               "messages": [{"role": "user", "content": marker}]}
    elif wire == "responses":
        obj = {"model": model, "input": [{"type": "message", "role": "user",
                                          "content": [{"type": "input_text", "text": marker}]}],
               "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]}
    else:
        obj = {"model": model, "messages": [{"role": "user", "content": marker}],
               "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
               "stream_options": {"include_usage": True}}
    obj["stream"] = stream
    obj["temperature"] = 1.0
    obj["note"] = "caf\u00e9 \u2603"
    return json.dumps(obj, indent=1, ensure_ascii=False).encode("utf-8")


def last_capture(upstream: FakeUpstream, needle: bytes) -> Captured:
    for cap in reversed(upstream.captured):
        if needle in cap.body:
            return cap
    raise AssertionError(f"upstream never saw a body containing {needle!r}")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- probe route

@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("wire", ["anthropic", "responses", "chat"])
def test_probe_round_trip(gateway: Gateway, upstream: FakeUpstream, client: httpx.Client, run_id: str,
                          wire: str, stream: bool) -> None:
    raw = body_for(wire, "probe", stream=stream, marker=run_id)
    url = gateway.base_url(run_id, "probe", wire) + API_PATH[wire] + ("?beta=true" if wire == "anthropic" else "")
    resp = client.post(url, content=raw, headers={"content-type": "application/json", "x-api-key": "anything",
                                                  "session-id": "sess-1"})
    # Without draining: the line is written before the client sees the end of the response.
    lines = gateway.records_path(run_id).read_text().splitlines()
    cap = last_capture(upstream, run_id.encode())
    assert resp.status_code == 200
    assert cap.body == raw                                             # request bytes unchanged
    assert resp.content == cap.response                                # response bytes unchanged
    api = "/v1" + API_PATH[wire] if wire != "anthropic" else "/v1/messages?beta=true"
    assert cap.path == f"/{run_id}{api}"
    assert cap.headers["session-id"] == "sess-1" and cap.headers["x-api-key"] == "anything"
    assert len(lines) == 1
    rec = RequestRecord.model_validate_json(lines[0])
    assert (rec.index, rec.run_id, rec.wire_format, rec.model, rec.stream, rec.status, rec.error) == \
        (0, run_id, wire, "probe", stream, 200, None)
    assert rec.path == api
    assert rec.usage is not None and rec.usage.model_dump() == EXPECTED_USAGE[wire]
    assert rec.body_sha256 == sha(raw) and rec.last_user_text == run_id
    assert [t.name for t in rec.tools] == [{"anthropic": "Bash", "responses": "exec_command", "chat": "bash"}[wire]]
    assert rec.inventory_present and rec.inventory_complete and rec.inventory_fingerprint
    assert rec.duration_ms is not None and rec.duration_ms > 0
    assert (gateway.records_dir / run_id / "bodies" / "0.json").read_bytes() == raw


@pytest.mark.parametrize(("fixture", "wire"), [
    ("claude_0.json", "anthropic"), ("claude_1.json", "anthropic"), ("claude_bigint.json", "anthropic"),
    ("codex_0.json", "responses"), ("codex_1.json", "responses")])
@pytest.mark.parametrize("route", ["probe", "live"])
def test_cli_bodies_arrive_byte_identical(gateway: Gateway, upstream: FakeUpstream, client: httpx.Client,
                                          run_id: str, fixture: str, wire: str, route: str) -> None:
    """The self-check: bodies captured from Claude Code 2.1.220 and Codex 0.145.0 reach the
    upstream unchanged on both pass-through routes (top-level metadata, a >64-bit integer)."""
    raw = fixture_bytes(fixture)
    alias = "probe" if route == "probe" else f"fake-{wire}"
    url = gateway.base_url(run_id, alias, wire) + API_PATH[wire]
    before = len(upstream.captured)
    resp = client.post(url, content=raw, headers={"content-type": "application/json",
                                                  "x-api-key": gateway.api_key(run_id)})
    assert resp.status_code == 200
    cap = next(c for c in upstream.captured[before:] if c.body and sha(c.body) == sha(raw))
    assert cap.body == raw
    if fixture == "claude_bigint.json":
        assert b"123456789012345678901234567890" in cap.body
        assert json.loads(cap.body)["metadata"]["tt_big_int"] == 123456789012345678901234567890
    if route == "live":
        assert cap.headers.get("x-api-key") == UPSTREAM_KEY or \
            cap.headers.get("authorization") == f"Bearer {UPSTREAM_KEY}"
        assert gateway.api_key(run_id) not in json.dumps(cap.headers)
    (rec,) = gateway.records(run_id)
    assert rec["body_sha256"] == sha(raw) and rec["status"] == 200
    assert rec["inventory_complete"] and len(rec["tools"]) >= 10


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize(("wire", "status"), [("anthropic", 429), ("responses", 500), ("chat", 400)])
def test_upstream_http_errors_are_relayed_and_recorded(gateway: Gateway, upstream: FakeUpstream,
                                                       client: httpx.Client, run_id: str, wire: str,
                                                       status: int, stream: bool) -> None:
    raw = body_for(wire, f"error-{status}", stream=stream, marker=run_id)
    resp = client.post(gateway.base_url(run_id, "probe", wire) + API_PATH[wire], content=raw,
                       headers={"content-type": "application/json"})
    cap = last_capture(upstream, run_id.encode())
    assert resp.status_code == status and resp.content == cap.response
    (rec,) = gateway.records(run_id)
    assert rec["status"] == status and rec["usage"] is None
    assert f"fake upstream error {status}" in rec["error"]


@pytest.mark.parametrize("wire", ["anthropic", "responses", "chat"])
def test_in_band_stream_error_is_recorded(gateway: Gateway, client: httpx.Client, run_id: str, wire: str) -> None:
    raw = body_for(wire, "stream-error", stream=True)
    resp = client.post(gateway.base_url(run_id, "probe", wire) + API_PATH[wire], content=raw)
    assert resp.status_code == 200
    (rec,) = gateway.records(run_id)
    assert rec["status"] == 200 and rec["error"] and ("overload" in rec["error"] or "failure" in rec["error"])


def test_unreachable_upstream_is_recorded_without_status(gateway: Gateway, client: httpx.Client,
                                                        run_id: str) -> None:
    resp = client.post(gateway.base_url(run_id, "fake-dead", "chat") + "/chat/completions",
                       content=body_for("chat", "fake-chat-model", stream=False),
                       headers={"authorization": f"Bearer {gateway.api_key(run_id)}"})
    assert resp.status_code >= 500
    (rec,) = gateway.records(run_id)
    assert rec["status"] is None and "connect" in rec["error"].lower()


# ---------------------------------------------------------------- run binding and keys

def test_live_routes_refuse_requests_without_a_run_key(gateway: Gateway, upstream: FakeUpstream,
                                                       client: httpx.Client, run_id: str) -> None:
    url = gateway.base_url(run_id, "fake-anthropic", "anthropic") + "/v1/messages"
    raw = body_for("anthropic", "fake-anthropic-model", stream=False, marker=run_id)
    forged = gateway.api_key(run_id).replace(run_id, run_id + "x")
    for headers in ({}, {"x-api-key": UPSTREAM_KEY}, {"x-api-key": forged}):
        assert client.post(url, content=raw, headers=headers).status_code == 401
    assert not any(run_id.encode() in c.body for c in upstream.captured)
    assert not gateway.records_path(run_id).exists()
    ok = client.post(url, content=raw, headers={"authorization": f"Bearer {gateway.api_key(run_id)}"})
    assert ok.status_code == 200 and last_capture(upstream, run_id.encode()).headers["x-api-key"] == UPSTREAM_KEY
    assert "authorization" not in last_capture(upstream, run_id.encode()).headers


def test_alias_with_missing_key_is_reported_and_not_routed(gateway: Gateway, client: httpx.Client,
                                                          run_id: str) -> None:
    assert gateway.missing_key("fake-nokey") == ABSENT_KEY_ENV
    assert gateway.missing_key("fake-chat") is None and gateway.missing_key("probe") is None
    with pytest.raises(GatewayError, match=ABSENT_KEY_ENV):
        gateway.base_url(run_id, "fake-nokey", "chat")
    resp = client.post(f"{gateway.url}/tt/live/fake-nokey/chat/v1/chat/completions",
                       content=body_for("chat", "m", stream=False), headers={"x-api-key": gateway.api_key(run_id)})
    assert resp.status_code == 404
    assert gateway.records(run_id) == []


def test_head_and_get_pass_through_without_a_record(gateway: Gateway, upstream: FakeUpstream,
                                                   client: httpx.Client, run_id: str) -> None:
    base = gateway.base_url(run_id, "probe", "anthropic")
    assert client.head(base + "/api/hello").status_code == 200        # Claude Code's first request
    assert client.get(base + "/v1/models").status_code == 200
    assert [(c.method, c.path) for c in upstream.captured if run_id in c.path][-2:] == [
        ("HEAD", f"/{run_id}/api/hello"), ("GET", f"/{run_id}/v1/models")]
    assert gateway.records(run_id) == []


def test_concurrent_runs_are_kept_apart(gateway: Gateway, client: httpx.Client) -> None:
    runs = [f"conc-{i}-{time.monotonic_ns()}" for i in range(6)]
    sent: dict[str, list[str]] = {r: [] for r in runs}
    errors: list[BaseException] = []

    def drive(run: str, i: int) -> None:
        wire = ["anthropic", "responses", "chat"][i % 3]
        alias = "probe" if i % 2 == 0 else f"fake-{wire}"
        try:
            with httpx.Client(timeout=60, trust_env=False) as c:
                for n in range(5):
                    raw = body_for(wire, "slow-5" if n % 2 else "m", stream=n % 2 == 1, marker=f"{run}/{n}")
                    sent[run].append(sha(raw))
                    r = c.post(gateway.base_url(run, alias, wire) + API_PATH[wire], content=raw,
                               headers={"x-api-key": gateway.api_key(run)})
                    assert r.status_code == 200, r.text
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=drive, args=(r, i)) for i, r in enumerate(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for run in runs:
        recs = gateway.records(run)
        assert [r["index"] for r in recs] == [0, 1, 2, 3, 4]
        assert {r["run_id"] for r in recs} == {run}
        assert [r["body_sha256"] for r in recs] == sent[run]
        assert [r["last_user_text"] for r in recs] == [f"{run}/{n}" for n in range(5)]


def test_drain_writes_a_request_still_open(gateway: Gateway, run_id: str) -> None:
    raw = body_for("anthropic", "slow-300", stream=True)
    done = threading.Event()

    def slow() -> None:
        with httpx.Client(timeout=60, trust_env=False) as c:
            c.post(gateway.base_url(run_id, "probe", "anthropic") + "/v1/messages", content=raw)
        done.set()

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.5)
    assert gateway.drain(run_id, timeout_s=0.2) == {"arrived": 1, "written": 1, "forced": 1}
    (rec,) = gateway.records(run_id, drain=False)
    assert "still open" in rec["error"]
    t.join()
    assert done.is_set() and len(gateway.records(run_id)) == 1      # no second line later


# ---------------------------------------------------------------- translation

TRANSLATIONS = [  # (harness wire, alias, upstream path, usage the client-facing format reports)
    ("anthropic", "fake-chat", "/v1/chat/completions", (30, 5)),
    ("responses", "fake-chat", "/v1/chat/completions", (30, 5)),
    ("chat", "fake-anthropic", "/v1/messages", (23, 3)),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("wire", "alias", "upstream_path", "tokens"), TRANSLATIONS,
                         ids=[f"{w}-to-{a}" for w, a, _, _ in TRANSLATIONS])
def test_translation_route_is_non_native_and_recorded(gateway: Gateway, upstream: FakeUpstream,
                                                      client: httpx.Client, run_id: str, stream: bool,
                                                      wire: str, alias: str, upstream_path: str,
                                                      tokens: tuple[int, int]) -> None:
    info = gateway.route_info(alias, wire)
    assert (info["route"], info["native"], info["model"]) == ("translation", False, alias)
    raw = body_for(wire, alias, stream=stream, marker=run_id)
    base = gateway.base_url(run_id, alias, wire)
    assert base == gateway.url + ("" if wire == "anthropic" else "/v1")
    resp = client.post(base + API_PATH[wire], content=raw, headers={"x-api-key": gateway.api_key(run_id)})
    assert resp.status_code == 200, resp.text
    cap = last_capture(upstream, run_id.encode())
    assert cap.path == upstream_path and cap.body != raw                    # translated: not native
    assert gateway.api_key(run_id) not in json.dumps(cap.headers)
    assert UPSTREAM_KEY in json.dumps(cap.headers)
    (rec,) = gateway.records(run_id)
    assert (rec["wire_format"], rec["status"], rec["error"], rec["stream"]) == (wire, 200, None, stream)
    assert rec["body_sha256"] == sha(raw) and rec["last_user_text"] == run_id
    assert rec["usage"] is not None
    assert (rec["usage"]["input_tokens"], rec["usage"]["output_tokens"]) == tokens


def test_translation_metadata_is_not_forwarded(gateway: Gateway, upstream: FakeUpstream,
                                               client: httpx.Client, run_id: str) -> None:
    """Why pass-through is the default: translation drops fields such as ``metadata``."""
    raw = body_for("anthropic", "fake-chat", stream=False, marker=run_id)
    client.post(gateway.url + "/v1/messages", content=raw, headers={"x-api-key": gateway.api_key(run_id)})
    assert b"u-1" not in last_capture(upstream, run_id.encode()).body


def test_route_info_for_pass_through_pairs(gateway: Gateway) -> None:
    assert gateway.route_info("probe", "chat") == {
        "alias": "probe", "route": "pass-through", "wire_format": "chat", "upstream": gateway.probe_url,
        "upstream_wire_format": "chat", "native": True, "model": "probe", "key_env": None}
    info = gateway.route_info("fake-anthropic", "anthropic")
    assert (info["route"], info["native"]) == ("pass-through", True)


# ---------------------------------------------------------------- several gateways

def test_two_gateways_side_by_side(gateway: Gateway, upstream: FakeUpstream, client: httpx.Client,
                                   tmp_path_factory: pytest.TempPathFactory, run_id: str) -> None:
    other = start_gateway(tmp_path_factory.mktemp("other"), upstream.url, record_bodies=False)
    try:
        assert other.port != gateway.port and other.pid != gateway.pid
        raw = body_for("chat", "m", stream=False, marker=run_id)
        url = other.base_url(run_id, "fake-chat", "chat") + "/chat/completions"
        assert client.post(url, content=raw, headers={"x-api-key": gateway.api_key(run_id)}).status_code == 401
        assert client.post(url, content=raw, headers={"x-api-key": other.api_key(run_id)}).status_code == 200
        (rec,) = other.records(run_id)
        assert rec["body_sha256"] == sha(raw)
        assert not (other.records_dir / run_id / "bodies").exists()      # bodies only when asked
        assert gateway.records(run_id) == []
    finally:
        other.stop()
    assert not other.running and gateway.running
    assert other.log_path.read_text().strip()


def test_envelope_like_keys_are_forwarded_as_data(gateway: Gateway, upstream: FakeUpstream,
                                                  client: httpx.Client, run_id: str) -> None:
    """LiteLLM reads top-level ``custom_body`` / ``query_params`` of a pass-through body as
    instructions; the gateway makes it treat them as ordinary data."""
    raw = json.dumps({"model": "probe", "stream": False, "messages": [{"role": "user", "content": run_id}],
                      "custom_body": {"model": "other"}, "query_params": {"injected": "1"}}).encode()
    resp = client.post(gateway.base_url(run_id, "probe", "chat") + "/chat/completions", content=raw,
                       headers={"content-type": "application/json"})
    cap = last_capture(upstream, run_id.encode())
    assert resp.status_code == 200 and cap.body == raw
    assert cap.path == f"/{run_id}/v1/chat/completions"              # no query injected
    (rec,) = gateway.records(run_id)
    assert rec["model"] == "probe" and rec["last_user_text"] == run_id


def test_drain_is_for_the_parent_only(gateway: Gateway, client: httpx.Client, run_id: str) -> None:
    resp = client.post(f"{gateway.url}/tt/control/drain/{run_id}")
    assert resp.status_code == 403
    assert client.get(f"{gateway.url}/tt/control/health").json()["routes_first"] is True
    assert gateway.drain(run_id) == {"arrived": 0, "written": 0, "forced": 0}


def test_admin_routes_are_closed(gateway: Gateway, client: httpx.Client, run_id: str) -> None:
    for path in ("/key/generate", "/model/new", "/config/update"):
        resp = client.post(gateway.url + path, json={}, headers={"authorization": f"Bearer {gateway.api_key(run_id)}"})
        assert resp.status_code in (401, 403), (path, resp.status_code)


# ---------------------------------------------------------------- planted secrets

def test_registered_secrets_never_reach_the_records_in_clear(gateway: Gateway, upstream: FakeUpstream,
                                                             client: httpx.Client, run_id: str) -> None:
    """The cell registers its planted secrets before the harness starts: the record and the
    body hold ``[REDACTED]`` and count the secret; what goes upstream is untouched (issue 17)."""
    secret = "planted-" + uuid.uuid4().hex     # no key shape: only the registered value redacts it
    gateway.register_run(run_id, [secret])
    raw = body_for("anthropic", "probe", stream=False, marker=f"{run_id} the key is {secret}, again {secret}")
    resp = client.post(gateway.base_url(run_id, "probe", "anthropic") + "/v1/messages", content=raw,
                       headers={"content-type": "application/json"})
    assert resp.status_code == 200
    assert last_capture(upstream, run_id.encode()).body == raw        # the provider sees the real request
    (record,) = gateway.records(run_id)
    run_dir = gateway.records_dir / run_id
    for path in (run_dir / "requests.jsonl", run_dir / "bodies" / "0.json"):
        data = path.read_bytes()
        assert secret.encode() not in data and b"[REDACTED]" in data, path
    assert record["planted_secrets"] == [2]
    assert record["last_user_text"] == f"{run_id} the key is [REDACTED], again [REDACTED]"
    assert record["body_sha256"] == sha(raw)                          # the hash is of what was sent


def test_only_the_parent_registers_secrets(gateway: Gateway, client: httpx.Client, run_id: str) -> None:
    resp = client.post(f"{gateway.url}/tt/control/run/{run_id}", json={"secrets": ["x" * 12]})
    assert resp.status_code == 403
