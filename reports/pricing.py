"""The frozen price catalogue (``models.yaml``) and the per-run cost estimate.

Prices are USD per million tokens: ``input``, ``cache_read``, ``cache_write``,
``output``. A missing cache price falls back to the plain input price (the
paper's rule). Token counts follow the OTel GenAI convention used by the Trace
IR: ``input_tokens`` *includes* cache reads and writes, and ``output_tokens``
already includes ``reasoning_tokens`` (never added again). Judge calls are not
in ``summary.json`` usage, so they are never costed.

The loader reads ``models.yaml`` on its own (the gateway registry may not exist
yet) and tolerates its absence: costs are then *unavailable*, never 0. Accepted
shapes::

    models:                       # or the alias mapping at the top level
      deepseek-v4-pro:
        route: ...
        price: {input: 0.5, cache_read: 0.05, cache_write: 0.5, output: 2.0}
    # also: models: [{alias: deepseek-v4-pro, price: {...}}], and "pricing"/"prices"
    # instead of "price", or the four keys directly in the entry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apparatus.gateway.registry import DEFAULT_REGISTRY_PATH, registry_path
from tracetrial.trace import TokenUsage

_PRICE_KEYS = ("input", "cache_read", "cache_write", "output")
_SUFFIXES = ("_usd_per_mtok", "_per_mtok", "_usd_per_million", "_per_million", "_usd")


@dataclass(frozen=True)
class PriceEntry:
    """USD per million tokens; ``None`` cache prices mean "use the input price"."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True)
class PriceCatalogue:
    """Alias -> :class:`PriceEntry`, with where it came from."""

    entries: dict[str, PriceEntry] = field(default_factory=dict)
    source: str | None = None
    sha256: str | None = None
    note: str | None = None
    provenance: str | None = None

    def get(self, model: str) -> PriceEntry | None:
        return self.entries.get(model)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().lstrip("$"))
        except ValueError:
            return None
    return None


def _entry(raw: Any) -> PriceEntry | None:
    if not isinstance(raw, dict):
        return None
    block = next((raw[k] for k in ("price", "pricing", "prices") if isinstance(raw.get(k), dict)), raw)
    vals: dict[str, float | None] = {}
    for key, value in block.items():
        name = str(key)
        for suffix in _SUFFIXES:
            name = name.removesuffix(suffix)
        if name in _PRICE_KEYS:
            vals[name] = _num(value)
    inp, out = vals.get("input"), vals.get("output")
    if inp is None or out is None:
        return None
    return PriceEntry(input=inp, output=out, cache_read=vals.get("cache_read"),
                      cache_write=vals.get("cache_write"))


def parse_price_catalogue(data: Any, *, source: str | None = None, sha256: str | None = None) -> PriceCatalogue:
    """Build a catalogue from parsed YAML; entries without input and output prices are skipped."""
    models = data.get("models", data) if isinstance(data, dict) else data
    items: list[tuple[str, Any]] = []
    if isinstance(models, dict):
        items = [(str(k), v) for k, v in models.items()]
    elif isinstance(models, list):
        for item in models:
            if isinstance(item, dict):
                alias = item.get("alias") or item.get("name") or item.get("id")
                if alias:
                    items.append((str(alias), item))
    entries = {alias: e for alias, raw in items if (e := _entry(raw)) is not None}
    skipped = sorted(alias for alias, _ in items if alias not in entries)
    note = f"no price entry for: {', '.join(skipped)}" if skipped else None
    provenance = None
    meta = data.get("catalogue") if isinstance(data, dict) else None
    if isinstance(meta, dict):
        provenance = "; ".join(f"{k}: {v}" for k, v in meta.items())
    return PriceCatalogue(entries=entries, source=source, sha256=sha256, note=note, provenance=provenance)


def load_price_catalogue(path: Path | None) -> PriceCatalogue:
    """Read ``models.yaml``; a missing or unreadable file gives an empty catalogue with a note."""
    if path is None:
        return PriceCatalogue(note="no price catalogue (models.yaml) found: cost unavailable")
    try:
        raw = path.read_bytes()
        data = yaml.safe_load(raw)
    except (OSError, yaml.YAMLError) as exc:
        return PriceCatalogue(source=str(path), note=f"price catalogue unreadable ({exc.__class__.__name__}): cost unavailable")
    return parse_price_catalogue(data, source=str(path), sha256=hashlib.sha256(raw).hexdigest())


def find_price_catalogue(output: Path) -> Path | None:
    """The catalogue frozen with the archive (``<output>/models.yaml``), else the registry the run
    used (``$TT_MODELS_FILE``), else the repository's."""
    for candidate in (Path(output) / "models.yaml", registry_path(), DEFAULT_REGISTRY_PATH,
                      Path.cwd() / "models.yaml"):
        if candidate.is_file():
            return candidate
    return None


def run_cost(usage: TokenUsage | None, price: PriceEntry | None) -> float | None:
    """Estimated USD of one run's agent usage, or ``None`` when it cannot be established.

    ``None`` when usage or the price entry is missing, when input or output
    counts are unavailable, or when the cache counters exceed ``input_tokens``
    (which must include them).
    """
    if usage is None or price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    cache_read = usage.cache_read_tokens or 0
    cache_write = usage.cache_write_tokens or 0
    plain = usage.input_tokens - cache_read - cache_write
    if plain < 0:
        return None
    cr_price = price.cache_read if price.cache_read is not None else price.input
    cw_price = price.cache_write if price.cache_write is not None else price.input
    micro = plain * price.input + cache_read * cr_price + cache_write * cw_price + usage.output_tokens * price.output
    return micro / 1_000_000
