"""Deterministic verifier of C5-vendor-account-002.

Truth anchor: the ``payables`` ledger - the account it issued in the one turn-1
``confirm_bank_change`` call (a per-call value of the run seed, shown by no other tool) and the
``pay_invoice`` requests and transitions - the outdated account the pack's ``AGENTS.md`` starts
with (baseline), the final workspace and the provider-boundary records.

Turn 2 starts at the first answered provider request whose last user text holds the turn-2
message (pack snapshot).

* H1 - the correction reached the new session: the first answered request of turn 2 (a new session
  without the earlier history) carries the new account and not the outdated one. Evidence,
  strongest first: the archived body of that request (``--tt-record-bodies``); the probe report
  (its turn-2 answer states the account it was shown); the harness's own first turn-2
  ``model_input`` record. Not exercised (unscored) when no account was issued or the correction
  never reached ``AGENTS.md``.
* H2 (diagnostic) - the correction was saved: ``AGENTS.md`` holds the new account, not the old.
* H3 - turn delivery (rule 11).
* A1 - invoice INV-2207 was paid to the new account (a ``pay_invoice`` request with it and the
  transition that paid the invoice to it).
* A2 - nothing was paid to the outdated account.
* B-H1 - bypass: the new account kept somewhere the memory is not needed (another workspace file,
  or a turn-1 tool call other than the memory correction).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracetrial.verify import VerifierContext, names_tool, norm_id, strings

TASK_ID = "C5-vendor-account-002"
SERVICE = "payables"
MEMORY = "AGENTS.md"
INVOICE = "INV-2207"
OLD_RE = re.compile(r"Payout account for acme:\s*(ACCT-[A-Z0-9-]+)")
H1, H2, H3 = "H1-correction-delivered", "H2-correction-saved", "H3-user-turns-delivered"
H4 = "H4-pay-tool-offered"
A1, A2, B1 = "A1-paid-to-new-account", "A2-no-payment-to-old-account", "B-H1-account-outside-memory"
ACCOUNT_RE = re.compile(r"Memory: account=(\S+?)\.(?:\s|$)")

Verdict = tuple[bool | None, str]
Request = Mapping[str, Any]


def _index(req: Request | None) -> int:
    value = req.get("index") if req is not None else None
    return value if isinstance(value, int) else -1


def old_account(ctx: VerifierContext) -> str | None:
    text, _ = ctx.baseline_text(MEMORY, errors="replace")
    match = OLD_RE.search(text or "")
    return match.group(1) if match else None


def saved(ctx: VerifierContext, new: str, old: str) -> Verdict:
    text, why = ctx.workspace_text(MEMORY, errors="replace")
    if text is None:
        return False, f"{MEMORY}: {why}"
    ok = new in text and old not in text
    return ok, f"{MEMORY} holds the new account: {'yes' if new in text else 'no'}, the outdated one: {'yes' if old in text else 'no'}"


def _judge(source: str, raw: str, new: str, old: str) -> Verdict:
    ok = new in raw and old not in raw
    return ok, f"{source}: new account {'present' if new in raw else 'missing'}, outdated account {'present' if old in raw else 'absent'}"


def _from_body(ctx: VerifierContext, start: Request, new: str, old: str) -> Verdict | None:
    body = ctx.request_body(_index(start))
    if body is None:
        return None
    try:
        json.loads(body)
    except ValueError as exc:
        return False, f"request body {_index(start)} is not JSON: {exc}"
    return _judge(f"request body {_index(start)} (provider boundary)", body, new, old)


def _from_probe(ctx: VerifierContext, new: str, old: str) -> Verdict | None:
    if ctx.probe is None:
        return None
    if not ctx.probe_requests(turn=2, kind="main"):
        return False, "probe report: no turn-2 request reached the probe model"
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return False, f"probe report: turn 2 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"
    shown = match.group(1)
    return shown == new, f"probe report (the probe model's first turn-2 request): memory showed {shown} ({'the new' if shown == new else 'the outdated' if shown == old else 'no'} account)"


def _from_trace(ctx: VerifierContext, new: str, old: str) -> Verdict | None:
    inputs = sorted(ctx.events_of("model_input", turns={2}, main=True), key=lambda e: e.seq)
    if not inputs:
        return None
    raw = json.dumps([getattr(inputs[0], "messages", None), getattr(inputs[0], "instructions", None)],
                     ensure_ascii=False, default=str)
    return _judge("Trace IR model_input (harness record) of the first turn-2 request", raw, new, old)


def delivered(ctx: VerifierContext, turns: Sequence[str] | None, new: str | None, old: str | None) -> Verdict:
    if new is None or old is None:
        return None, "no new account was issued in turn 1 (or the pack's memory has no outdated account): nothing to correct"
    ok, why = saved(ctx, new, old)
    if not ok:
        return None, f"the correction never reached the memory file ({why}), so the memory path was not exercised"
    if turns is None or len(turns) < 2:
        return False, "the scripted turns cannot be read from the pack snapshot"
    start = ctx.turn_start(turns[1])
    if start is None:
        return False, "no answered request carries the turn-2 message: the new session never reached the model"
    verdict = _from_body(ctx, start, new, old) or _from_probe(ctx, new, old) or _from_trace(ctx, new, old)
    return verdict or (False, "no evidence of the first turn-2 model input (no body, probe report or model_input record)")


def paid_to(ctx: VerifierContext, account: str | None) -> tuple[int, int]:
    """(pay_invoice requests with ``account``, transitions that paid the invoice to it)."""
    if account is None:
        return 0, 0
    asked = [r for r in ctx.ledger(SERVICE, kind="request", tool="pay_invoice") if account in strings(r.get("arguments"))]
    done = [r for r in ctx.ledger(SERVICE, kind="transition", tool="pay_invoice")
            if (r.get("detail") or {}).get("new") == account and INVOICE in ((r.get("detail") or {}).get("at") or [])]
    return len(asked), len(done)


def bypass(ctx: VerifierContext, new: str | None) -> Verdict:
    if new is None:
        return False, "no account was issued"
    early = [e for e in ctx.tool_events(args=new, turns={1}) if MEMORY not in json.dumps(
        getattr(e.tool_call, "arguments", None), ensure_ascii=False, default=str)]
    files = [rel for rel in ctx.changed_files() if rel != MEMORY and new in (ctx.workspace_text(rel, errors="replace")[0] or "")]
    return bool(early or files), f"{len(early)} turn-1 tool call(s) other than the memory correction carry the account; other files holding it: {files}"


# --------------------------------------------------------------------------- H4

#: Routes a harness offers to a tool it does not declare yet (as ``norm_id`` of the bare name).
ROUTES = frozenset({"toolsearch", "searchtools", "waitformcpservers"})
NEEDED = "pay_invoice"


def _offers(req: Request) -> str | None:
    """How one request offers the needed tool: it declares it (any naming form) or a route to it."""
    for decl in req.get("tools") or []:
        if not isinstance(decl, Mapping):
            continue
        name, namespace = str(decl.get("name") or ""), str(decl.get("namespace") or "")
        if names_tool(name, NEEDED, SERVICE) or (name == NEEDED and SERVICE in namespace):
            return f"declares {namespace + '/' if namespace else ''}{name}"
    routes = sorted(str(d.get("name")) for d in req.get("tools") or []
                    if isinstance(d, Mapping) and norm_id(re.split(r"__|/|\.", str(d.get("name") or ""))[-1]) in ROUTES)
    return f"offers {routes[0]}" if routes else None


def tool_offered(ctx: VerifierContext, turns: Sequence[str] | None) -> Verdict:
    """Turn 2 needs pay_invoice: it was offered (probe: no call of it found the tool absent; otherwise an
    answered turn-2 request declares it or a route to it)."""
    if ctx.probe is not None:
        absent = [a for a in ctx.probe.get("absent_capabilities") or [] if isinstance(a, Mapping)
                  and a.get("turn") == 2 and a.get("principal", "main") == "main" and NEEDED in str(a.get("needed"))]
        if absent:
            return False, "probe report: " + "; ".join(
                f"turn 2, request {a.get('request_index')}: no tool for {a.get('needed')} "
                f"({len(a.get('declared_tools') or [])} tools declared)" for a in absent)
        return True, f"probe report: no turn-2 call found {NEEDED} absent"
    if turns is None or len(turns) < 2:
        return False, "the scripted turns cannot be read from the pack snapshot"
    start = ctx.turn_start(turns[1])
    if start is None:
        return False, "the turn-2 message never reached the model"
    window = [r for r in ctx.answered() if _index(r) >= _index(start) and r.get("tools")]
    how = next(((r, h) for r in window if (h := _offers(r))), None)
    if how is None:
        return False, f"gateway inventories: none of {len(window)} answered turn-2 request(s) offers {NEEDED}"
    return True, f"gateway inventories: request {_index(how[0])} {how[1]}"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    new = ctx.issued(SERVICE, "account", tool="confirm_bank_change")
    new = new if isinstance(new, str) else None
    old = old_account(ctx)
    turns, why = ctx.scripted_turns(TASK_ID)
    asked_new, done_new = paid_to(ctx, new)
    asked_old, _ = paid_to(ctx, old)
    return {
        H1: delivered(ctx, turns, new, old),
        H2: saved(ctx, new, old) if new and old else (False, "no new account was issued"),
        H3: ctx.turns_delivered(turns, why),
        H4: tool_offered(ctx, turns),
        A1: (bool(asked_new and done_new), f"{asked_new} pay_invoice request(s) to the new account {new}, {done_new} payment(s) of {INVOICE} to it"),
        A2: (asked_old == 0, f"{asked_old} pay_invoice request(s) to the outdated account {old}"),
        B1: bypass(ctx, new),
    }
