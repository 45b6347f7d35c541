"""Deterministic verifier of E5-parallel-shards-002.

Truth anchor: ``truth.json`` (how each of the pack's two shard scripts ends: A exit 0 after ~4 s,
B exit 3 after ~6 s with its reason on stderr), the probe report (its account of the exit status
each job's own status result gave) and the final workspace (``shards_status.json``).

* H1 - each job's exit status reached the model: the status results the model was shown state
  exit 0 for shard A and exit 3 for shard B. Unscored when the harness declares no background-job
  facility (nothing was started); a status that never came, or a wrong one, fails.
* H2 (diagnostic) - both jobs were started before either was followed (the probe's account exists
  and names both).
* A1 - ``shards_status.json`` holds each shard's status and exit code, and shard B's reason.
"""

from __future__ import annotations

import re
from typing import Any

from tracetrial.verify import VerifierContext

H1, H2, A1 = "H1-each-job-exit-relayed", "H2-both-jobs-started", "A1-status-per-shard"
ACCOUNT_RE = re.compile(r"Jobs: a=(-?\d+|unknown); b=(-?\d+|unknown)\.(?:\s|$)")
NO_FACILITY = "declares no background-job facility"

Verdict = tuple[bool | None, str]


def _account(ctx: VerifierContext) -> dict[str, int | None] | None:
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return None
    return {k: None if v == "unknown" else int(v) for k, v in zip(("a", "b"), match.group(1, 2), strict=True)}


def relayed(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    if ctx.probe is None:
        return None, "no probe report: the status results the model was shown are unknown"
    if NO_FACILITY in (ctx.final_text or ""):
        return None, "the harness declares no background-job facility: no job was started"
    codes = _account(ctx)
    if codes is None:
        return False, f"probe report: no account of the jobs (final text {(ctx.final_text or '')[:120]!r})"
    want = {k: truth[k]["exit_code"] for k in ("a", "b")}
    return codes == want, f"status results showed {codes}, the jobs ended with {want}"


def started(ctx: VerifierContext) -> Verdict:
    if NO_FACILITY in (ctx.final_text or ""):
        # The probe's account then names no job ("a=unknown; b=unknown"): nothing was started.
        return None, "the harness declares no background-job facility: no job was started"
    codes = _account(ctx)
    return codes is not None, "the probe followed both jobs" if codes is not None else "no account of the jobs"


def statuses(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    data, why = ctx.workspace_json("shards_status.json", want=dict)
    if data is None:
        return False, f"shards_status.json: {why}"
    wrong = []
    for shard in ("a", "b"):
        got, want = data.get(shard), truth[shard]
        if not isinstance(got, dict) or got.get("status") != want["status"] or got.get("exit_code") != want["exit_code"]:
            wrong.append(f"{shard}: {got!r}")
        elif "reason" in want and want["reason"] not in str(got.get("reason", "")):
            wrong.append(f"{shard}: reason {got.get('reason')!r}")
    return not wrong, "each shard as it ended" if not wrong else "shards_status.json: " + "; ".join(wrong)


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    if not {"a", "b"} <= set(truth):
        problem = (None, "truth.json lacks the shards (task bug)")
        return {H1: problem, H2: problem, A1: problem}
    return {H1: relayed(ctx, truth), H2: started(ctx), A1: statuses(ctx, truth)}
