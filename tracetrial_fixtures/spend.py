"""What a session spends on live models: the ``--tt-max-cost`` cap and the ``--tt-estimate`` dry run.

Costs come from the frozen price catalogue (``models.yaml``, :mod:`reports.pricing`) and each
finished cell's archived token usage (``summary.json``), never from a provider's bill.

* **Cap** (``--tt-max-cost USD``): before a cell starts, the session's spend so far is read; once it
  has reached the cap, the cell is not started (a skip naming the cap). Cells already in flight
  finish, so the session can end above the cap by what they cost. Under xdist every worker appends
  to one ledger, ``<output>/spend/<session>.jsonl``, one JSON line per cell this session ran,
  written under an exclusive lock; a cell resumed from the archive costs nothing. A cell whose
  usage was not reported is recorded as *unknown* and counted in the summary, not as 0 spent.
* **Estimate** (``--tt-estimate``): before anything runs, each selected cell's cost at its
  model-call budget (``budgets.max_model_calls`` × tokens per call × the model's uncached prices):
  an upper figure for a run that uses its whole budget. Tokens per call are the median over the
  harness's archived cells in the output folder when there are any, else
  :data:`TOKENS_PER_CALL` (medians measured on this suite's probe-protocol archives: the request
  size is the harness's own — system prompt, tools, history — whatever model answers).
"""

from __future__ import annotations

import fcntl
import functools
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.pricing import PriceCatalogue, PriceEntry, run_cost
from reports.records import harness_family as harness_family_of
from tracetrial.results import Summary
from tracetrial.trace import TokenUsage

__all__ = ["CAP_REASON", "DEFAULT_TOKENS", "TOKENS_PER_CALL", "CellEstimate", "SpendLedger", "SpendTotal", "cell_cost",
           "estimate_cells", "estimate_lines", "format_estimate", "is_priced", "prices_for", "tokens_per_call"]

#: Input, output tokens per model call by harness family: medians over this suite's probe-protocol
#: archives of the real CLIs (Claude Code 2.1.220, Codex 0.145.0, OpenClaw 2026.9.6; 2026-12). The
#: probe writes little, a live model more: output is set to what a tool-using turn typically writes.
TOKENS_PER_CALL: dict[str, tuple[int, int]] = {
    "claude_code": (17_000, 600),
    "codex": (12_000, 600),
    "openclaw": (13_000, 600),
    "deepseek": (12_000, 600),
    "reference": (4_000, 600),
}
#: A harness not in :data:`TOKENS_PER_CALL` and without archived cells.
DEFAULT_TOKENS: tuple[int, int] = (16_000, 600)
LEDGER_DIR = "spend"


def cell_cost(summary_path: Path, price: PriceEntry | None) -> float | None:
    """USD of one archived cell's agent usage, ``None`` when it cannot be established."""
    try:
        summary = Summary.model_validate_json(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return run_cost(summary.usage, price)


@dataclass(frozen=True)
class SpendTotal:
    """The session's spend so far: known USD, cells counted, cells whose cost is unknown."""

    usd: float
    cells: int
    unknown: int


class SpendLedger:
    """The session's spend, shared by the controller and every xdist worker (one file, locked)."""

    def __init__(self, output: Path, session_id: str):
        self.path = Path(output) / LEDGER_DIR / f"{session_id}.jsonl"

    def add(self, cell: str, usd: float | None) -> None:
        """Record one cell this session ran (``usd`` None: its usage was not reported)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.write(json.dumps({"cell": cell, "usd": usd}) + "\n")
            fh.flush()

    def total(self) -> SpendTotal:
        """What the ledger holds now (an absent ledger: nothing spent)."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_SH)
                lines = fh.read().splitlines()
        except FileNotFoundError:
            return SpendTotal(0.0, 0, 0)
        usd, cells, unknown = 0.0, 0, 0
        for line in lines:
            try:
                value = json.loads(line).get("usd")
            except (ValueError, AttributeError):
                continue  # a line cut by a killed worker: the cells after it still count
            cells += 1
            if isinstance(value, (int, float)):
                usd += float(value)
            else:
                unknown += 1
        return SpendTotal(usd, cells, unknown)


# ------------------------------------------------------------------------------- estimate


@dataclass(frozen=True)
class CellEstimate:
    """One selected cell's cost at its model-call budget (``usd`` None: the model has no price)."""

    task: str
    harness: str
    model: str
    model_calls: int
    tokens: tuple[int, int]
    tokens_source: str
    usd: float | None


def tokens_per_call(output: Path, harness_family: str) -> tuple[tuple[int, int], str]:
    """Median input and output tokens per model call of the harness's archived cells under
    ``output`` (any task, any model), else the built-in figure; with where it came from."""
    ins: list[float] = []
    outs: list[float] = []
    for path in Path(output).glob("traces/*/*/*/summary.json"):
        if harness_family_of(path.parent.name) != harness_family:
            continue
        try:
            summary = Summary.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        usage, calls = summary.usage, summary.model_calls
        if usage is None or not calls or usage.input_tokens is None:
            continue
        ins.append(usage.input_tokens / calls)
        outs.append((usage.output_tokens or 0) / calls)
    built_in = TOKENS_PER_CALL.get(harness_family, DEFAULT_TOKENS)
    if not ins:
        return built_in, "built-in"
    # Archived output counts are the probe's (scripted, short) unless live: never below the built-in.
    return (round(statistics.median(ins)), max(round(statistics.median(outs)), built_in[1])), \
        f"median of {len(ins)} archived cell(s)"


def estimate_cells(cells: Iterable[tuple[str, str, str, int]], prices: PriceCatalogue,
                   tokens: dict[str, tuple[tuple[int, int], str]]) -> list[CellEstimate]:
    """Each ``(task, harness, model, max_model_calls)`` at its budget (pure).

    Args:
        tokens: harness family -> (input, output tokens per call, where the figure came from).
    """
    out = []
    for task, harness, model, calls in cells:
        family = harness_family_of(harness)
        (tin, tout), source = tokens.get(family, (DEFAULT_TOKENS, "built-in"))
        usage = TokenUsage(input_tokens=calls * tin, output_tokens=calls * tout)
        out.append(CellEstimate(task, harness, model, calls, (tin, tout), source, run_cost(usage, prices.get(model))))
    return out


def format_estimate(rows: Sequence[CellEstimate], cap: float | None = None) -> list[str]:
    """The dry run's table: per model × harness, cells, model calls at budget, USD; then the total."""
    groups: dict[tuple[str, str], list[CellEstimate]] = {}
    for r in rows:
        groups.setdefault((r.model, r.harness), []).append(r)
    head = ["model", "harness", "cells", "model calls", "tokens/call in+out", "USD at budget"]
    table = [head]
    for (model, harness), items in sorted(groups.items()):
        known = [r.usd for r in items if r.usd is not None]
        usd = "no price" if len(known) < len(items) else f"{sum(known):.2f}"
        tin, tout = items[0].tokens
        table.append([model, harness, str(len(items)), str(sum(r.model_calls for r in items)),
                      f"{tin}+{tout} ({items[0].tokens_source})", usd])
    widths = [max(len(row[c]) for row in table) for c in range(len(head))]
    lines = ["  ".join(cell.ljust(widths[c]) if c < 2 or c == 4 else cell.rjust(widths[c])
                       for c, cell in enumerate(row)).rstrip() for row in table]
    total = sum(r.usd for r in rows if r.usd is not None)
    unpriced = sorted({r.model for r in rows if r.usd is None})
    lines.append(f"{len(rows)} cell(s): at most about ${total:.2f} if every cell uses its whole model-call budget "
                 "at uncached prices (a cell that finishes early costs less; prompt caching lowers it further)")
    if unpriced:
        lines.append(f"no price in models.yaml for: {', '.join(unpriced)} (not in the total)")
    if cap is not None:
        lines.append(f"--tt-max-cost ${cap:g}: cells stop being started once the archived usage reaches it")
    return lines


#: The skip reason of a cell the cap kept from starting (the summary counts them by it).
CAP_REASON = "--tt-max-cost reached"


def prices_for(output: Path) -> PriceCatalogue:
    """The catalogue the reports of ``output`` use (frozen with the archive, else the repository's);
    read once per process and folder (every cell line and every cell's spend ask for it)."""
    return _prices(str(output))


@functools.lru_cache(maxsize=8)
def _prices(output: str) -> PriceCatalogue:
    from reports.pricing import find_price_catalogue, load_price_catalogue

    return load_price_catalogue(find_price_catalogue(Path(output)))


def is_priced(prices: PriceCatalogue, model: str) -> bool:
    """Whether the model costs anything (the probe is free: its cells need no ledger)."""
    price = prices.get(model)
    return price is not None and (price.input > 0 or price.output > 0)


def estimate_lines(refs: Sequence[Any], settings: Any) -> list[str]:
    """The ``--tt-estimate`` table for the selected cells (``refs``: their :class:`CellRef` params)."""
    from tracetrial.task import TaskPack

    cells: list[tuple[str, str, str, int]] = []
    broken: list[str] = []
    for ref in refs:
        pack = ref.load().pack
        if not isinstance(pack, TaskPack):
            broken.append(ref.task_id)
            continue
        cells.append((ref.task_id, ref.harness, ref.model, pack.spec.budgets.max_model_calls))
    families = {harness_family_of(h) for _, h, _, _ in cells}
    tokens = {f: tokens_per_call(settings.output, f) for f in families}
    lines = format_estimate(estimate_cells(cells, prices_for(settings.output), tokens), settings.max_cost) \
        if cells else ["no cells selected"]
    if broken:
        lines.append(f"not priced (the pack does not load): {', '.join(sorted(set(broken)))}")
    return lines
