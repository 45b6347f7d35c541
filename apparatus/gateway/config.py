"""What the parent process hands to the proxy (pure): route prefixes, run keys, the
LiteLLM config and the settings file our in-proxy hooks read.

Routes (all on 127.0.0.1):

===================================  ============================================
``/tt/probe/<run_id>/<api path>``    pass-through to ``<probe_url>/<run_id>/<api path>``
``/tt/live/<alias>/<wire>/<api>``    pass-through to the alias's upstream for that
                                     format, the run key replaced by the real key
``/v1/messages``, ``/v1/responses``, LiteLLM translation routes (``model`` = alias)
``/v1/chat/completions``
``/tt/control/...``                  health (open) and drain (gateway secret)
===================================  ============================================

**Run binding.** Probe requests carry the run id in the path. Live and translation
requests carry it in the API key the harness is given, ``tt.<run_id>.<sig>``, where
``sig`` is an HMAC of the run id under a per-gateway secret: the gateway derives the run
from the key, refuses keys it did not issue, and never forwards the key upstream.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from apparatus.gateway.registry import ModelRegistry
from tracetrial.harness import WireFormat

PROBE_PREFIX = "/tt/probe"
LIVE_PREFIX = "/tt/live"
CONTROL_PREFIX = "/tt/control"
#: Header carrying the gateway secret on control requests (drain).
CONTROL_HEADER = "x-tt-control"
SETTINGS_ENV = "TT_GATEWAY_SETTINGS"
HOOKS_MODULE = "apparatus.gateway._proxy"
#: Methods the pass-through routes accept (Claude Code sends ``HEAD /`` before its first call).
PASS_THROUGH_METHODS = ["GET", "POST", "HEAD", "PUT", "PATCH", "DELETE"]
#: LiteLLM's own endpoints that translation routes use (model listing included: some
#: harnesses ask for it).
TRANSLATION_PATHS = ("/v1/messages", "/v1/messages/count_tokens", "/v1/responses",
                     "/v1/chat/completions", "/messages", "/responses", "/chat/completions",
                     "/v1/models", "/models")


class LiveRoute(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    alias: str
    wire_format: WireFormat


class ProxySettings(BaseModel):
    """Settings file read by :mod:`apparatus.gateway._proxy` inside the proxy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_id: str
    secret: str
    records_dir: str
    record_bodies: bool
    #: ``"<alias>/<wire>"`` -> route, for every live pass-through route registered.
    live_routes: dict[str, LiveRoute]


def run_key(secret: str, run_id: str) -> str:
    """The API key that binds a harness's live/translation requests to ``run_id``."""
    return f"tt.{run_id}.{_sig(secret, run_id)}"


def run_of_key(secret: str, key: str | None) -> str | None:
    """The run id of a key this gateway issued, else ``None``."""
    if not key or not key.startswith("tt."):
        return None
    run_id, _, sig = key[3:].rpartition(".")
    if run_id and hmac.compare_digest(sig, _sig(secret, run_id)):
        return run_id
    return None


def _sig(secret: str, run_id: str) -> str:
    return hmac.new(secret.encode(), run_id.encode(), hashlib.sha256).hexdigest()[:24]


def build_litellm_config(registry: ModelRegistry, *, probe_url: str | None, master_key: str,
                         env: Mapping[str, str], recorder: bool = True,
                         ) -> tuple[dict[str, Any], dict[str, LiveRoute]]:
    """The LiteLLM proxy config and the live routes it registers (``recorder=False`` leaves
    the recorder callback out, for overhead measurements only).

    Live aliases whose key env var is unset get no route (cells using them are skipped with
    :meth:`ModelRegistry.missing_key`); keys are referenced as ``os.environ/<VAR>`` so no
    secret is written to disk.
    """
    passthrough: list[dict[str, Any]] = []
    if probe_url:
        passthrough.append(_pt(PROBE_PREFIX, probe_url, None))
    live: dict[str, LiveRoute] = {}
    model_list: list[dict[str, Any]] = []
    for alias, entry in sorted(registry.models.items()):
        if entry.kind != "live" or not entry.key_env or not env.get(entry.key_env):
            continue
        for wire, url in entry.upstreams.items():
            header = entry.auth_header(wire)
            headers = ({"x-api-key": f"os.environ/{entry.key_env}"} if header == "x-api-key"
                       else {"authorization": f"Bearer os.environ/{entry.key_env}"})
            passthrough.append(_pt(f"{LIVE_PREFIX}/{alias}/{wire}", url, headers))
            live[f"{alias}/{wire}"] = LiveRoute(alias=alias, wire_format=wire)
        if entry.translation is not None:
            params: dict[str, Any] = {"model": f"{entry.translation.provider}/{entry.model or alias}",
                                      "api_key": f"os.environ/{entry.key_env}"}
            if entry.translation.api_base:
                params["api_base"] = entry.translation.api_base
            model_list.append({"model_name": alias, "litellm_params": params})
    chat_translation = any(
        e.kind == "live" and e.translation is not None and registry.route(a, "anthropic").route == "translation"
        and registry.route(a, "anthropic").upstream_wire_format == "chat"
        for a, e in registry.models.items())
    config = {
        "model_list": model_list,
        "litellm_settings": {
            **({"callbacks": f"{HOOKS_MODULE}.recorder"} if recorder else {}),
            "drop_params": False,
            "request_timeout": 600,
            "num_retries": 0,     # one harness request = one upstream request
            # Anthropic-format requests to OpenAI models use chat/completions, as declared.
            "use_chat_completions_url_for_anthropic_messages": chat_translation,
        },
        "router_settings": {"disable_cooldowns": True, "num_retries": 0},
        "general_settings": {
            "master_key": master_key,
            "custom_auth": f"{HOOKS_MODULE}.authenticate",
            "pass_through_endpoints": passthrough,
        },
    }
    return config, live


def _pt(path: str, target: str, headers: dict[str, str] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": path, "target": target.rstrip("/"), "include_subpath": True,
                             "forward_headers": True, "auth": True, "methods": PASS_THROUGH_METHODS}
    if headers:
        entry["headers"] = headers
    return entry


def harness_base_url(gateway_url: str, *, kind: Literal["probe", "pass-through", "translation"],
                     run_id: str, alias: str, wire_format: WireFormat) -> str:
    """Base URL a harness appends its API path to (``/v1`` included for OpenAI formats)."""
    suffix = "" if wire_format == "anthropic" else "/v1"
    if kind == "probe":
        return f"{gateway_url}{PROBE_PREFIX}/{run_id}{suffix}"
    if kind == "pass-through":
        return f"{gateway_url}{LIVE_PREFIX}/{alias}/{wire_format}{suffix}"
    return f"{gateway_url}{suffix}"
