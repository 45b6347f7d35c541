"""End to end under the LIVE protocol, without a key (issue 26 item 6): the path a real provider
key takes — a user's registry (``$TT_MODELS_FILE``), the key from the environment, the real LiteLLM
gateway on loopback, a pass-through route and a LiteLLM translation route — to a local
OpenAI-compatible upstream (``apparatus.gateway.fake_upstream``) instead of a provider.

The reference harness runs the example pack (E1) once per model alias, as a user would run
``pytest tasks/ --tt-model <alias>``; the test reads what the user would read: the archive (live
protocol, the route, the usage the upstream reported, the cost from the frozen prices), the
upstream's own capture (the key reached it, as the auth header the registry names), and that the key
is nowhere in the archive. Then ``--tt-estimate`` and ``--tt-max-cost`` on the same aliases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from apparatus.gateway.fake_upstream import USAGE, FakeUpstream
from reports.pricing import PriceEntry
from tests.conftest import REPO
from tracetrial.archive import RunPaths, verify_manifest
from tracetrial.results import ResultRecord, Summary
from tracetrial_fixtures.spend import cell_cost

TASK = "E1-build-status-001"
KEY = "sk-tt-fake-live-canary-7f3a91"
#: USD per million tokens (made up: what matters is that the archive's cost follows from them).
PRICE = {"input": 2.0, "cache_read": 0.5, "cache_write": 0.0, "output": 10.0}


def registry(url: str) -> str:
    entry = {"kind": "live", "key_env": "TT_FAKE_LIVE_KEY", "price": PRICE}
    models = {
        "probe": {"kind": "probe", "model": "probe", "price": {k: 0 for k in PRICE}},
        # the reference speaks chat: a byte-for-byte pass-through route
        "fake-native": {**entry, "model": "fake-native", "upstreams": {"chat": f"{url}/v1"}},
        # the upstream speaks only anthropic here: LiteLLM translates the reference's chat to it
        "fake-translated": {**entry, "model": "fake-translated", "upstreams": {"anthropic": url},
                            "translation": {"provider": "anthropic", "api_base": url}},
    }
    return json.dumps({"catalogue": {"frozen_on": "2026-12-01", "source": "test prices"}, "models": models})


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def env(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("registry") / "models.yaml"
    path.write_text(registry(upstream.url))  # JSON is YAML
    return {**os.environ, "TT_MODELS_FILE": str(path), "TT_FAKE_LIVE_KEY": KEY,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def run(env: dict[str, str], output: Path, *args: str, harness: str = "reference") -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-p", "no:cacheprovider", "-k", TASK,
           f"--tt-harness={harness}", "--tt-sandbox=local", f"--tt-output={output}", *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def archive(env: dict[str, str], upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("live")
    proc = run(env, out, "--tt-model=fake-native,fake-translated")
    assert "APPARATUS ERROR" not in proc.stdout, proc.stdout[-4000:]
    for model in ("fake-native", "fake-translated"):
        assert RunPaths.for_cell(out, TASK, model, "reference").result.is_file(), proc.stdout[-4000:] + proc.stderr[-2000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("model", "route", "native"), [("fake-native", "pass-through", True),
                                                         ("fake-translated", "translation", False)])
def test_a_live_cell_reaches_the_upstream_and_is_archived_with_its_route_usage_and_cost(
    archive: Path, model: str, route: str, native: bool
) -> None:
    paths = RunPaths.for_cell(archive, TASK, model, "reference")
    result = ResultRecord.model_validate_json(paths.result.read_text())
    assert result.identity.protocol == "live" and result.identity.model == model
    routed = result.resolved_config["gateway_route"]
    assert routed["alias"] == model and routed["route"] == route and routed["native"] is native, routed
    assert verify_manifest(paths.root).ok
    records = [json.loads(line) for line in paths.root.joinpath("gateway", "requests.jsonl").read_text().splitlines()]
    assert records and all(r.get("status") == 200 for r in records)
    usage = [r.get("usage") for r in records]
    assert all(u and u.get("input_tokens") and u.get("output_tokens") for u in usage), usage
    summary = Summary.model_validate_json(paths.summary.read_text())
    assert summary.usage is not None and summary.usage.input_tokens and summary.usage.output_tokens
    cost = cell_cost(paths.summary, PriceEntry(**PRICE))  # the frozen prices x the archived usage
    assert cost is not None and cost > 0
    # every byte of the archive: the key never lands in it
    for f in paths.root.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


@pytest.mark.slow
def test_the_key_reaches_the_upstream_in_the_header_the_registry_names(archive: Path,
                                                                       upstream: FakeUpstream) -> None:
    chat = [c for c in upstream.captured if c.path.endswith("/chat/completions")]
    anthropic = [c for c in upstream.captured if c.path.endswith("/messages")]
    assert chat and anthropic, [c.path for c in upstream.captured]
    assert all(c.headers.get("authorization") == f"Bearer {KEY}" for c in chat)
    assert all(c.headers.get("x-api-key") == KEY for c in anthropic)
    assert USAGE["chat"]["prompt_tokens"] and USAGE["anthropic"]["input_tokens"]


@pytest.mark.slow
def test_estimate_and_cost_cap_on_live_aliases(env: dict[str, str], tmp_path: Path) -> None:
    est = run(env, tmp_path / "est", "--tt-model=fake-native", "--tt-estimate")
    assert est.returncode == 0 and "TraceTrial estimate (--tt-estimate: nothing ran)" in est.stdout, est.stdout[-3000:]
    assert "fake-native" in est.stdout and "$" in est.stdout
    capped = run(env, tmp_path / "cap", "--tt-model=fake-native", "--tt-max-cost=0.0000001",
                 harness="reference,reference+hide_exit_code")
    skipped = [ln for ln in capped.stdout.splitlines() if ln.startswith("[tt] ") and "--tt-max-cost reached" in ln]
    assert len(skipped) == 1, capped.stdout[-3000:]
