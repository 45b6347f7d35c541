"""HTTP edge cases of the probe server seen with real harnesses behind the gateway."""

from __future__ import annotations

import http.client

from apparatus.probe.server import ProbeServer


def test_head_with_body_does_not_poison_keepalive() -> None:
    # Claude Code's preflight `HEAD /api/hello` reaches the probe with a `{}` body; an
    # unread body used to turn the next POST on the same connection into a 501.
    with ProbeServer() as srv:
        host, port = srv.url.split("//")[1].split(":")
        conn = http.client.HTTPConnection(host, int(port))
        conn.request("HEAD", "/no-run/api/hello", body=b"{}", headers={"Content-Length": "2"})
        head = conn.getresponse()
        head.read()
        conn.request("POST", "/no-run/v1/messages", body=b"{}", headers={"Content-Type": "application/json"})
        post = conn.getresponse()
        body = post.read()
        assert head.status == 404
        assert post.status == 404 and b"not_found_error" in body
        conn.close()


def test_reference_child_requests_advance_the_child_script() -> None:
    from apparatus.probe.classify import principal_of
    from apparatus.probe.conversation import Conversation

    conv = Conversation(wire_format="chat", model="probe", stream=True, system_text="", items=[], tools=[])
    assert principal_of(conv, {"x-tt-principal-id": "child-1"}) == "subagent:child-1"
    assert principal_of(conv, {"x-tt-principal-id": "main"}) == "main"
    assert principal_of(conv, {}) == "main"
