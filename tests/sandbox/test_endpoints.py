"""Task-declared HTTP endpoints (``task.yaml`` ``endpoints``): served on the loopback for the run,
every request in a hash-chained private ledger, the URL written to the workspace and the
baseline, gone after the run; the spec's validation."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from apparatus.endpoints import serving
from apparatus.simulators.ledger import verify_ledger
from tracetrial.task import EndpointSpec, TaskSpec


def test_requests_are_answered_ledgered_and_the_url_written(tmp_path: Path) -> None:
    ws, base, ledgers = tmp_path / "ws", tmp_path / "base", tmp_path / "ledgers"
    spec = EndpointSpec(name="upstream", url_file="config/upstream.url", body='{"rate": "1.0842"}')
    with serving([spec], ledgers, [ws, base]) as urls:
        url = urls["upstream"]
        assert (ws / "config" / "upstream.url").read_text().strip() == url
        assert (base / "config" / "upstream.url").read_text().strip() == url
        with urllib.request.urlopen(url + "rates/EUR?x=1", timeout=5) as resp:
            assert resp.status == 200 and json.loads(resp.read()) == {"rate": "1.0842"}
        req = urllib.request.Request(url + "report", data=b"secret=42", method="POST")
        urllib.request.urlopen(req, timeout=5).close()
    records = [json.loads(line) for line in (ledgers / "upstream.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["tool"], r["arguments"]["path"]) for r in records] == [
        ("request", "GET", "/rates/EUR?x=1"), ("request", "POST", "/report")]
    assert records[1]["arguments"]["body"] == "secret=42" and records[1]["arguments"]["body_bytes"] == 9
    check = verify_ledger(ledgers / "upstream.jsonl")
    assert check.ok, check.problems  # the chain and its head are intact
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)  # stopped with the run


def test_an_unused_endpoint_leaves_an_empty_ledger(tmp_path: Path) -> None:
    with serving([EndpointSpec(name="upstream", url_file="u.url")], tmp_path / "l", [tmp_path / "ws"]):
        pass
    assert (tmp_path / "l" / "upstream.jsonl").read_text() == ""


@pytest.mark.parametrize("url_file", ["../x", "/etc/x", ".hidden/x", "a/../b", "", "a//b"])
def test_the_url_file_stays_inside_the_workspace(url_file: str) -> None:
    with pytest.raises(ValueError):
        EndpointSpec(name="upstream", url_file=url_file)


def test_endpoint_and_simulator_names_are_unique() -> None:
    base = {"id": "G3-x-001", "title": "t", "component": "G", "property": "network_restriction",
            "surface": "terminal", "permissions": {"mode": "native"}}
    TaskSpec.model_validate({**base, "endpoints": [{"name": "up", "url_file": "u"}]})
    with pytest.raises(ValueError, match="unique"):
        TaskSpec.model_validate({**base, "endpoints": [{"name": "up", "url_file": "u"}, {"name": "up", "url_file": "v"}]})
