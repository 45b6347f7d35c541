"""The model registry (``models.yaml`` at the repository root): alias -> route, key, price.

An alias is what users pass to ``--tt-model``. Each entry says which wire formats
its upstream speaks natively; the gateway then gives a harness a **pass-through**
route when the harness speaks one of them and a **translation** route (LiteLLM's
own format conversion, recorded as non-native) otherwise::

    models:
      probe:                       # the embedded probe model (always pass-through, free)
        kind: probe
      claude-sonnet-4-6:
        kind: live
        model: claude-sonnet-4-6   # the upstream's model id
        key_env: ANTHROPIC_API_KEY
        upstreams: {anthropic: https://api.anthropic.com}
        translation: {provider: anthropic}
        price: {input: 3.0, cache_read: 0.3, cache_write: 3.75, output: 15.0}

An upstream URL is the root the harness's API path is appended to
(``/v1/messages``, ``/v1/responses``, ``/v1/chat/completions``).
Prices are USD per million tokens.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from tracetrial.errors import TraceTrialError
from tracetrial.harness import WireFormat
from tracetrial.model import FrozenModel

WIRE_FORMATS: tuple[WireFormat, ...] = ("anthropic", "responses", "chat")
RouteKind = Literal["pass-through", "translation"]

#: ``models.yaml`` of this checkout.
DEFAULT_REGISTRY_PATH = Path(__file__).resolve().parents[2] / "models.yaml"


class RegistryError(TraceTrialError):
    """``models.yaml`` is malformed, or an alias is unknown."""


class Price(FrozenModel):
    """USD per million tokens."""

    input: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    output: float = Field(ge=0)

    def cost_usd(self, usage: Mapping[str, Any] | None) -> float | None:
        """Cost of one call from a recorder ``usage`` dict (``input_tokens`` includes the
        cached and cache-written tokens, as the recorder reports it); ``None`` without usage."""
        if not usage or usage.get("input_tokens") is None or usage.get("output_tokens") is None:
            return None
        cached = int(usage.get("cache_read_tokens") or 0)
        written = int(usage.get("cache_write_tokens") or 0)
        fresh = max(int(usage["input_tokens"]) - cached - written, 0)
        total = (fresh * self.input + cached * self.cache_read + written * self.cache_write
                 + int(usage["output_tokens"]) * self.output)
        return total / 1_000_000


class Translation(FrozenModel):
    """How LiteLLM reaches the model on a translation route."""

    provider: str = Field(description="LiteLLM provider prefix, e.g. 'anthropic', 'openai', 'deepseek'.")
    api_base: str | None = Field(default=None, description="LiteLLM api_base; provider default if unset.")
    wire_format: WireFormat | None = Field(
        default=None, description="Format LiteLLM speaks upstream (default: chat when the upstream "
                                  "speaks it, else its first format).")


class ModelEntry(FrozenModel):
    """One alias of ``models.yaml``."""

    kind: Literal["probe", "live"]
    model: str | None = Field(default=None, description="Model id sent upstream (default: the alias).")
    key_env: str | None = Field(default=None, description="Env var holding the upstream API key.")
    upstreams: dict[WireFormat, str] = Field(
        default_factory=dict, description="Native wire format -> upstream root URL.")
    auth: dict[WireFormat, Literal["x-api-key", "bearer"]] = Field(
        default_factory=dict, description="Upstream auth header per format (default: x-api-key "
                                          "for anthropic, bearer otherwise).")
    translation: Translation | None = None
    price: Price
    notes: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelEntry:
        if self.kind == "live":
            if not self.key_env:
                raise ValueError("a live model needs key_env")
            if not self.upstreams:
                raise ValueError("a live model needs at least one upstream")
            for url in self.upstreams.values():
                if not url.startswith(("http://", "https://")):
                    raise ValueError(f"upstream {url!r} is not an http(s) URL")
        return self

    @property
    def wire_formats(self) -> tuple[WireFormat, ...]:
        """Formats the upstream speaks natively (the probe speaks all three)."""
        if self.kind == "probe":
            return WIRE_FORMATS
        return tuple(w for w in WIRE_FORMATS if w in self.upstreams)

    def auth_header(self, wire: WireFormat) -> Literal["x-api-key", "bearer"]:
        return self.auth.get(wire, "x-api-key" if wire == "anthropic" else "bearer")


class Catalogue(FrozenModel):
    """Provenance of the prices: a frozen copy, never fetched at run time."""

    frozen_on: date
    source: str


class RouteInfo(FrozenModel):
    """How one (alias, harness wire format) pair reaches its model; goes into the
    resolved config of ``result.json``."""

    alias: str
    route: RouteKind
    wire_format: WireFormat = Field(description="What the harness speaks.")
    upstream: str | None = Field(description="Upstream root URL (probe URL for the probe).")
    upstream_wire_format: WireFormat
    native: bool = Field(description="True when the model sees the harness's bytes unchanged.")
    model: str = Field(description="Model name the harness must send.")
    key_env: str | None


#: Env var naming another registry file: a user's own aliases (a provider behind a proxy, a local
#: OpenAI-compatible server) without editing the repository's ``models.yaml``.
REGISTRY_ENV = "TT_MODELS_FILE"


def registry_path() -> Path:
    """``$TT_MODELS_FILE`` when set, else the repository's ``models.yaml``."""
    override = os.environ.get(REGISTRY_ENV)
    return Path(override) if override else DEFAULT_REGISTRY_PATH


class ModelRegistry(FrozenModel):
    """Every alias of ``models.yaml``."""

    catalogue: Catalogue
    models: dict[str, ModelEntry]

    @classmethod
    def load(cls, path: Path | None = None) -> ModelRegistry:
        """Read and validate ``models.yaml`` (default: :func:`registry_path`)."""
        path = path or registry_path()
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as e:
            raise RegistryError(f"{path}: cannot read the model registry: {e}") from e
        return cls.from_data(raw, where=str(path))

    @classmethod
    def from_data(cls, data: Any, *, where: str = "<registry>") -> ModelRegistry:
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise RegistryError(f"{where}: invalid model registry:\n{e}") from e

    def get(self, alias: str) -> ModelEntry:
        try:
            return self.models[alias]
        except KeyError:
            known = ", ".join(sorted(self.models))
            raise RegistryError(f"unknown model alias {alias!r} (known: {known}; "
                                f"add it to models.yaml)") from None

    def missing_key(self, alias: str, env: Mapping[str, str] | None = None) -> str | None:
        """The env var to set when ``alias`` is live and its key is absent, else ``None``."""
        entry = self.get(alias)
        env = os.environ if env is None else env
        if entry.kind == "live" and entry.key_env and not env.get(entry.key_env):
            return entry.key_env
        return None

    def route(self, alias: str, wire_format: WireFormat, *, probe_url: str | None = None) -> RouteInfo:
        """Pass-through when the upstream speaks ``wire_format``, else translation."""
        entry = self.get(alias)
        if entry.kind == "probe":
            return RouteInfo(alias=alias, route="pass-through", wire_format=wire_format,
                             upstream=probe_url, upstream_wire_format=wire_format, native=True,
                             model=entry.model or alias, key_env=None)
        if wire_format in entry.upstreams:
            return RouteInfo(alias=alias, route="pass-through", wire_format=wire_format,
                             upstream=entry.upstreams[wire_format], upstream_wire_format=wire_format,
                             native=True, model=entry.model or alias, key_env=entry.key_env)
        if entry.translation is None:
            raise RegistryError(f"model {alias!r} speaks {list(entry.upstreams)} only and has no "
                                f"'translation' entry, so a {wire_format} harness cannot use it")
        target = entry.translation.wire_format or (
            "chat" if "chat" in entry.upstreams else entry.wire_formats[0])
        return RouteInfo(alias=alias, route="translation", wire_format=wire_format,
                         upstream=entry.translation.api_base or entry.upstreams[target],
                         upstream_wire_format=target, native=False, model=alias,
                         key_env=entry.key_env)
