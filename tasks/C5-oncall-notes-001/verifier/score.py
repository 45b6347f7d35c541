"""Deterministic verifier of C5-oncall-notes-001.

Truth anchor: the ``pager`` ledger - the code it issued in the one turn-1
``issue_escalation_code`` call (a per-call value of the run seed, shown by no other tool), the
``page_oncall`` requests and the state transition that marked the code paged - the final
workspace (``AGENTS.md``) and the provider-boundary records (what each model request carried).

Turn 2 starts at the first answered provider request whose last user text holds the turn-2
message (pack snapshot).

* H1 - the memory: the first answered request of turn 2 (a new session without the earlier
  history) carries the issued code, which only the project memory noted in turn 1 can hold there.
  Evidence, strongest first: the archived body of that request (``--tt-record-bodies``); the probe
  report (the probe reads the same request, and its turn-2 answer states the code it was shown);
  the harness's own first turn-2 ``model_input`` record. Not exercised (unscored) when no code was
  issued or the note was never saved to ``AGENTS.md``.
* H2 (diagnostic) - the note was saved: ``AGENTS.md`` holds the issued code after the run.
* H3 - turn delivery (rule 11): both scripted user messages reached the model verbatim.
* A1 - the payments on-call was paged with the issued code: a ``page_oncall`` request with it and
  the desk's transition of that code to paged. (A2, exactly one ``issue_escalation_code``, is a
  ledger rule.)
* B-H1 - bypass: the code was put somewhere the memory is not needed (a workspace file other than
  ``AGENTS.md``, or turn-1 tool-call arguments other than the memory note).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracetrial.verify import VerifierContext, names_tool, norm_id, strings

TASK_ID = "C5-oncall-notes-001"
SERVICE = "pager"
MEMORY = "AGENTS.md"
H1, H2, H3 = "H1-memory-delivered", "H2-note-saved", "H3-user-turns-delivered"
H4 = "H4-page-tool-offered"
A1, B1 = "A1-oncall-paged", "B-H1-code-outside-memory"
ACCOUNT_RE = re.compile(r"Memory: code=(\S+?)\.(?:\s|$)")

Verdict = tuple[bool | None, str]
Request = Mapping[str, Any]


def _index(req: Request | None) -> int:
    value = req.get("index") if req is not None else None
    return value if isinstance(value, int) else -1


def noted(ctx: VerifierContext, code: str) -> Verdict:
    text, why = ctx.workspace_text(MEMORY, errors="replace")
    if text is None:
        return False, f"{MEMORY}: {why}"
    return code in text, f"{MEMORY} {'holds' if code in text else 'does not hold'} the issued code {code}"


def _from_body(ctx: VerifierContext, start: Request, code: str) -> Verdict | None:
    body = ctx.request_body(_index(start))
    if body is None:
        return None
    try:
        json.loads(body)
    except ValueError as exc:
        return False, f"request body {_index(start)} is not JSON: {exc}"
    ok = code in body
    return ok, f"request body {_index(start)} (provider boundary): code {code} {'present' if ok else 'missing'}"


def _from_probe(ctx: VerifierContext, code: str) -> Verdict | None:
    if ctx.probe is None:
        return None
    if not ctx.probe_requests(turn=2, kind="main"):
        return False, "probe report: no turn-2 request reached the probe model"
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return False, f"probe report: turn 2 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"
    shown = None if match.group(1) == "missing" else match.group(1)
    why = f"probe report (the probe model's first turn-2 request): code {code} {'present' if shown == code else 'missing'}"
    return shown == code, why + (f" (shown {shown})" if shown not in (None, code) else "")


def _from_trace(ctx: VerifierContext, code: str) -> Verdict | None:
    inputs = sorted(ctx.events_of("model_input", turns={2}, main=True), key=lambda e: e.seq)
    if not inputs:
        return None
    raw = json.dumps([getattr(inputs[0], "messages", None), getattr(inputs[0], "instructions", None)],
                     ensure_ascii=False, default=str)
    ok = code in raw
    return ok, f"Trace IR model_input (harness record) of the first turn-2 request: code {code} {'present' if ok else 'missing'}"


def memory_delivered(ctx: VerifierContext, turns: Sequence[str] | None, code: str | None) -> Verdict:
    if code is None:
        return None, "the pager issued no code in turn 1, so there was nothing to remember"
    saved, why = noted(ctx, code)
    if not saved:
        return None, f"the note was never saved ({why}), so the memory path was not exercised"
    if turns is None or len(turns) < 2:
        return False, "the scripted turns cannot be read from the pack snapshot"
    start = ctx.turn_start(turns[1])
    if start is None:
        return False, "no answered request carries the turn-2 message: the new session never reached the model"
    verdict = _from_body(ctx, start, code) or _from_probe(ctx, code) or _from_trace(ctx, code)
    return verdict or (False, "no evidence of the first turn-2 model input (no body, probe report or model_input record)")


def note_saved(ctx: VerifierContext, code: str | None) -> Verdict:
    if code is None:
        return False, "the pager issued no code"
    return noted(ctx, code)


def paged(ctx: VerifierContext, code: str | None) -> Verdict:
    if code is None:
        return False, "the pager issued no code"
    asked = [r for r in ctx.ledger(SERVICE, kind="request", tool="page_oncall") if code in strings(r.get("arguments"))]
    done = [r for r in ctx.ledger(SERVICE, kind="transition", tool="page_oncall")
            if (r.get("detail") or {}).get("new") is True and code in ((r.get("detail") or {}).get("at") or [])]
    others = [a for r in ctx.ledger(SERVICE, kind="request", tool="page_oncall")
              for a in strings(r.get("arguments")) if a.startswith("ESC-") and a != code]
    return bool(asked and done), (f"{len(asked)} page_oncall request(s) with {code}, {len(done)} paging transition(s)"
                                  + (f"; other codes sent: {others}" if others else ""))


def bypass(ctx: VerifierContext, code: str | None) -> Verdict:
    if code is None:
        return False, "no code was issued"
    early = [e for e in ctx.tool_events(args=code, turns={1}) if MEMORY not in json.dumps(
        getattr(e.tool_call, "arguments", None), ensure_ascii=False, default=str)]
    files = [rel for rel in ctx.changed_files()
             if rel != MEMORY and code in (ctx.workspace_text(rel, errors="replace")[0] or "")]
    return bool(early or files), f"{len(early)} turn-1 tool call(s) other than the memory note carry the code; other files holding it: {files}"


# --------------------------------------------------------------------------- H4

#: Routes a harness offers to a tool it does not declare yet (as ``norm_id`` of the bare name).
ROUTES = frozenset({"toolsearch", "searchtools", "waitformcpservers"})
NEEDED = "page_oncall"


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
    """Turn 2 needs page_oncall: it was offered (probe: no call of it found the tool absent; otherwise an
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
    code = ctx.issued(SERVICE, "code", tool="issue_escalation_code")
    code = code if isinstance(code, str) else None
    turns, why = ctx.scripted_turns(TASK_ID)
    return {
        H1: memory_delivered(ctx, turns, code),
        H2: note_saved(ctx, code),
        H3: ctx.turns_delivered(turns, why),
        H4: tool_offered(ctx, turns),
        A1: paged(ctx, code),
        B1: bypass(ctx, code),
    }
