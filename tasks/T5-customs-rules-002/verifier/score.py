"""Deterministic verifier of T5-customs-rules-002.

Truth anchor: ``truth.json`` (each line's HS code, dangerous-goods class and packing, the carrier
notice and the rules version, from the pack's own SKILL.md), the probe report (its account of what
it was shown after loading the skill) and the final workspace (``declaration.json``).

* H1 - the skill's filing rules reached the model: after the load the model was shown the rules
  section at the end of the body and its RULES-VERSION line (a body cut without notice fails; a
  harness offering no way to load the workspace's skill fails: the channel is the target).
  Evidence: the probe's account; without a probe report, unscored; unscored too when the probe's
  own read of the listed location failed (a missing file, a non-zero exit: nothing was loaded).
* A1 - ``declaration.json`` equals the truth: both lines (codes, DG class, packing), the carrier
  notice and the rules version.
"""

from __future__ import annotations

import re
from typing import Any

from tracetrial.verify import VerifierContext

H1, A1 = "H1-skill-rules-relayed", "A1-declaration-correct"
ACCOUNT_RE = re.compile(r"Skill: rules=(shown|missing); version=(\S+?)\.(?:\s|$)")
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
        return False, f"probe report: no account of the skill (final text {final[:120]!r})"
    if NO_CHANNEL in final:
        return False, "the harness offered no way to load the workspace's skill (no skill tool, no listed location)"
    rules, version = match.group(1) == "shown", match.group(2)
    ok = rules and version == truth["rules_version"]
    return ok, f"after the load the model was shown the filing rules: {'yes' if rules else 'no'}, version {version}"


def declaration(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    data, why = ctx.workspace_json("declaration.json", want=dict)
    if data is None:
        return False, f"declaration.json: {why}"
    want = {"lines": truth["lines"], "carrier_notice": truth["carrier_notice"], "rules_version": truth["rules_version"]}
    wrong = {k: data.get(k) for k in want if data.get(k) != want[k]}
    return not wrong, "declaration as the skill gives it" if not wrong else f"declaration.json wrong or missing: {wrong}"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    if not {"lines", "carrier_notice", "rules_version"} <= set(truth):
        problem = (None, "truth.json is incomplete (task bug)")
        return {H1: problem, A1: problem}
    return {H1: relayed(ctx, truth), A1: declaration(ctx, truth)}
