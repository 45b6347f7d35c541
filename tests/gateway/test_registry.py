"""models.yaml: schema, frozen price catalogue, routes, missing keys, cost."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from apparatus.gateway.registry import ModelRegistry, RegistryError

#: Per-token prices in the model cost map bundled with the pinned LiteLLM.
#: (found without importing litellm, which would try to download the live map)
_LITELLM = Path(importlib.util.find_spec("litellm").origin).parent  # type: ignore[union-attr,arg-type]
COST_MAP = json.loads((_LITELLM / "model_prices_and_context_window_backup.json").read_text())


@pytest.fixture(scope="module")
def registry() -> ModelRegistry:
    return ModelRegistry.load()


def test_the_repository_registry_has_the_papers_aliases(registry: ModelRegistry) -> None:
    assert {"probe", "deepseek-v4-flash", "deepseek-v4-pro"} <= set(registry.models)
    assert any(e.upstreams.get("anthropic", "").startswith("https://api.anthropic.com")
               for e in registry.models.values())
    assert any("responses" in e.upstreams for e in registry.models.values())
    assert registry.catalogue.frozen_on.isoformat() == "2026-11-30"
    probe = registry.get("probe")
    assert probe.kind == "probe" and probe.price.cost_usd({"input_tokens": 10**6, "output_tokens": 10**6}) == 0


def test_catalogue_matches_the_pinned_litellm_cost_map(registry: ModelRegistry) -> None:
    """The catalogue says where its prices come from; hold it to that."""
    for alias, entry in registry.models.items():
        if entry.kind != "live":
            continue
        row = COST_MAP[entry.model or alias]
        per_m = {k: round((row.get(f) or 0) * 1e6, 6) for k, f in [
            ("input", "input_cost_per_token"), ("output", "output_cost_per_token"),
            ("cache_read", "cache_read_input_token_cost"), ("cache_write", "cache_creation_input_token_cost")]}
        assert entry.price.model_dump() == pytest.approx(per_m), alias


def test_same_format_pairs_pass_through_and_cross_format_pairs_translate(registry: ModelRegistry) -> None:
    r = registry.route("deepseek-v4-pro", "chat")
    assert (r.route, r.native, r.upstream, r.model) == ("pass-through", True, "https://api.deepseek.com",
                                                       "deepseek-v4-pro")
    r = registry.route("deepseek-v4-pro", "responses")
    assert (r.route, r.native, r.upstream_wire_format, r.model) == ("translation", False, "chat", "deepseek-v4-pro")
    r = registry.route("claude-sonnet-4-6", "anthropic")
    assert (r.route, r.key_env) == ("pass-through", "ANTHROPIC_API_KEY")
    r = registry.route("probe", "responses", probe_url="http://127.0.0.1:9")
    assert (r.route, r.native, r.upstream) == ("pass-through", True, "http://127.0.0.1:9")


def test_missing_key_names_the_env_var(registry: ModelRegistry) -> None:
    assert registry.missing_key("deepseek-v4-flash", env={}) == "DEEPSEEK_API_KEY"
    assert registry.missing_key("deepseek-v4-flash", env={"DEEPSEEK_API_KEY": "k"}) is None
    assert registry.missing_key("probe", env={}) is None
    with pytest.raises(RegistryError, match="unknown model alias 'nope'"):
        registry.missing_key("nope")


def test_cost_counts_cache_reads_and_writes_at_their_prices(registry: ModelRegistry) -> None:
    price = registry.get("claude-sonnet-4-6").price
    usage = {"input_tokens": 1_000_000, "cache_read_tokens": 400_000, "cache_write_tokens": 100_000,
             "output_tokens": 10_000}
    expected = (500_000 * 3.0 + 400_000 * 0.30 + 100_000 * 3.75 + 10_000 * 15.0) / 1e6
    assert price.cost_usd(usage) == pytest.approx(expected)
    assert price.cost_usd(None) is None


def test_invalid_registries_are_refused() -> None:
    base = {"catalogue": {"frozen_on": "2026-01-01", "source": "x"}}
    price = {"input": 1, "cache_read": 0, "cache_write": 0, "output": 1}
    with pytest.raises(RegistryError, match="key_env"):
        ModelRegistry.from_data({**base, "models": {"m": {"kind": "live", "upstreams": {"chat": "https://x"},
                                                          "price": price}}})
    with pytest.raises(RegistryError, match="'anthropic', 'responses' or 'chat'"):
        ModelRegistry.from_data({**base, "models": {"m": {"kind": "live", "key_env": "K",
                                                          "upstreams": {"gemini": "https://x"}, "price": price}}})
    reg = ModelRegistry.from_data({**base, "models": {"m": {"kind": "live", "key_env": "K",
                                                           "upstreams": {"chat": "https://x"}, "price": price}}})
    with pytest.raises(RegistryError, match="no 'translation'"):
        reg.route("m", "anthropic")
