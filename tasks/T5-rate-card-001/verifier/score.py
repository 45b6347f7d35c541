"""Deterministic verifier of T5-rate-card-001.

Truth anchor: ``truth.json`` (the card's Z097 rate, row count and checksum, from the pack's own
SKILL.md), the probe report (the probe's account of the card it was shown after loading the skill)
and the final workspace (``quote.json``).

* H1 - the skill's body reached the model whole: after the load, the model was shown every row of
  the card (120) and its closing checksum line. Fails when the load was offered but the body came
  short (a cut without notice); fails when the harness offers no way to load the workspace's skill
  (for T5 the skill channel is the target: its absence is the measured result). Evidence: the
  probe report (its account); without a probe report, unscored; unscored too when the probe's own
  read of the listed location failed (a missing file, a non-zero exit: nothing was loaded).
* A1 - ``quote.json`` quotes Z097 at the card's rate for 38 kg with the card's checksum.
"""

from __future__ import annotations

import re
from typing import Any

from tracetrial.verify import VerifierContext

H1, A1 = "H1-skill-body-relayed", "A1-quote-correct"
ACCOUNT_RE = re.compile(r"Skill: rows=(\d+); zone=(shown|missing); checksum=(\S+?)\.(?:\s|$)")
NO_CHANNEL = "offers no way to load"

Verdict = tuple[bool | None, str]


def relayed(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    if ctx.probe is None:
        return None, "no probe report: what the model was shown after the load is unknown"
    failed = ctx.failed_probe_calls("read_file")
    if failed:
        # the probe's own read of the listed location failed (e.g. Codex 0.171.0's "r1/<skill>/SKILL.md"
        # read without expanding its skill root): what the load would have shown is unknown
        request, why = failed[0]
        return None, (f"the probe's own load of the listed skill file failed (request {request.get('index')}, "
                      f"{why}): what the harness relays after a load is not shown (probe gap, unscored)")
    final = ctx.final_text or ""
    match = ACCOUNT_RE.search(final)
    if match is None:
        return False, f"probe report: no account of the card (final text {final[:120]!r})"
    if NO_CHANNEL in final:
        return False, "the harness offered no way to load the workspace's skill (no skill tool, no listed location)"
    rows, zone, checksum = int(match.group(1)), match.group(2), match.group(3)
    ok = rows == truth["rows"] and checksum == truth["checksum"]
    return ok, (f"after the load the model was shown {rows} of {truth['rows']} rows, zone row {zone}, "
                f"checksum {checksum}")


def quote(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    data, why = ctx.workspace_json("quote.json", want=dict)
    if data is None:
        return False, f"quote.json: {why}"
    want = {"zone": truth["zone"], "weight_kg": truth["weight_kg"], "rate_cents_per_kg": truth["rate_cents_per_kg"],
            "total_cents": truth["total_cents"], "card_checksum": truth["checksum"]}
    wrong = {k: data.get(k) for k in want if data.get(k) != want[k]}
    return not wrong, "quote as the card gives it" if not wrong else f"quote.json wrong or missing: {wrong}"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    if not {"zone", "weight_kg", "rate_cents_per_kg", "total_cents", "checksum", "rows"} <= set(truth):
        problem = (None, "truth.json is incomplete (task bug)")
        return {H1: problem, A1: problem}
    return {H1: relayed(ctx, truth), A1: quote(ctx, truth)}
