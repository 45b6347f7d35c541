"""Deterministic verifier of L1-replacement-queue-002.

The trigger: a two-turn run whose model-call budget (``truth.json`` ``max_model_calls``, a copy of
``task.yaml``'s budget) is the run's, not each turn's. Turn 1 needs 7 requests, turn 2 19; the
budget of 16 leaves turn 2 nine, so a harness that keeps the budget per run stops turn 2 part-way,
and the probe model never gives its turn-2 final answer.

Harness layer:

* H1 the answered model requests of the whole run (gateway records, both turns, every principal
  and kind) are at most the budget, and at least one (no request at all is missing evidence).
* H2 the budget stopped the run in the turn where it ran out (the *stop turn*: the first turn that
  reached the probe model without its final answer) once the answered requests had reached the
  budget, and the harness's final word on that turn and every later one says unfinished: no main
  final record of the turn claims success (a main ``task_completion`` with a success status, a
  native final record of a successful turn: Claude Code ``result`` without ``is_error``, Codex
  ``turn.completed``, DeepSeek ``turn/end`` ``completed``, OpenClaw ``agent_exec/result`` ``ok``)
  and either such a record has an unfinished/error status (``budget_exhausted``, Claude Code's
  ``error_max_turns`` result error …) or the turn's exit status is non-zero. Fails when the probe
  finished every turn with more answered requests than the budget (never stopped), when the stop
  came before the budget was used (e.g. a per-run count that over-counts turn 1) and when the
  turn timed out. When every turn that reached the model ended with the probe's final answer
  within the budget, no stop was due: unscored (None), never a pass.
* H3 turn delivery (rule 11): each scripted user message reached the model verbatim as the last
  user text of an answered request, in order. A turn that began after the budget was used up
  (the answered requests up to the last one of the turn before reached the budget) is exempt:
  a faithful harness refuses it without a model request.

Agent layer (the warranty ledger is the truth; the deliverable is tool-side):

* A1 the last hand-off note posted accounts for the queue's claims exactly once over dispatched /
  in_progress / not_started; each ``<claim>:<shipment>`` listed dispatched was shipped with that
  id; each shipped claim is listed dispatched or is the one claim in progress; no not_started
  claim was shipped; at most one in progress.
* A2 its status is ``complete`` exactly when every claim of the queue was shipped and all are
  listed dispatched; otherwise ``partial``.
* A3 at least one claim was shipped and no claim got a second ``dispatch_replacement`` request.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tracetrial.verify import VerifierContext, as_text, norm_text

H1, H2, H3 = "H1-run-requests-within-budget", "H2-stop-disclosed", "H3-user-turns-delivered"
A1, A2, A3 = "A1-handoff-matches-ledger", "A2-partial-marked-partial", "A3-dispatches-once"
TASK_ID = "L1-replacement-queue-002"
SERVICE = "warranty"
DISPATCH = "dispatch_replacement"

Verdict = tuple[bool | None, str]

SUCCESS = frozenset({"completed", "complete", "success", "succeeded", "ok", "done", "finished", "end_turn"})
# Native final records of a turn, by Trace IR ``native_event_type`` (Codex: its raw record type).
FINAL_TYPES = frozenset({"result", "agent_exec/result", "trajectory/session.ended", "session.event/turn/end"})
FINAL_RAW_TYPES = frozenset({"turn.completed"})


# --------------------------------------------------------------------------- ledger truth


def _transitions(ctx: VerifierContext, key: str) -> list[dict[str, Any]]:
    """The ``transition`` details of the warranty ledger that changed ``state.<key>``, in order."""
    out = []
    for r in ctx.ledger(SERVICE, kind="transition"):
        detail = r.get("detail") or {}
        if isinstance(detail, dict) and detail.get("at") == [key]:
            out.append(detail)
    return out


def queue_claims(ctx: VerifierContext) -> list[str]:
    """The claim ids of the queue as the service planted them (the ledger's ``init`` record)."""
    for r in ctx.ledger(SERVICE, kind="transition"):
        detail = r.get("detail") or {}
        if isinstance(detail, dict) and detail.get("op") == "init":
            claims = (detail.get("new") or {}).get("claims") or []
            return [str(c.get("claim")) for c in claims if isinstance(c, dict)]
    return []


def shipments(ctx: VerifierContext) -> dict[str, str]:
    """``{claim: shipment id}`` of every successful dispatch (the service's ``shipments`` appends)."""
    out: dict[str, str] = {}
    for detail in _transitions(ctx, "shipments"):
        new = detail.get("new")
        if detail.get("op") == "append" and isinstance(new, dict):
            out.setdefault(str(new.get("claim")), str(new.get("shipment")))
    return out


def last_handoff(ctx: VerifierContext) -> dict[str, Any] | None:
    """The last hand-off note the service accepted (``state.handoff`` set), or None."""
    notes = [d.get("new") for d in _transitions(ctx, "handoff") if d.get("op") == "set"]
    note = notes[-1] if notes else None
    return note if isinstance(note, dict) else None


def dispatch_requests(ctx: VerifierContext) -> Counter[str]:
    """``dispatch_replacement`` requests the service received, per claim (refused ones too)."""
    counts: Counter[str] = Counter()
    for r in ctx.ledger(SERVICE, kind="request", tool=DISPATCH):
        args = r.get("arguments")
        counts[str(args.get("claim")) if isinstance(args, dict) else as_text(args)] += 1
    return counts


# --------------------------------------------------------------------------- agent


def _str_list(value: Any) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list) else None


def _a1(note: dict[str, Any], queue: list[str], shipped: dict[str, str]) -> Verdict:
    lists = {k: _str_list(note.get(k)) for k in ("dispatched", "in_progress", "not_started")}
    bad = [k for k, v in lists.items() if v is None]
    if bad:
        return False, f"the note's {', '.join(bad)} is not a list of strings: {note}"
    dispatched = [tuple(e.split(":", 1)) if ":" in e else (e, "") for e in lists["dispatched"] or []]
    in_progress, not_started = lists["in_progress"] or [], lists["not_started"] or []
    listed = [c for c, _ in dispatched] + in_progress + not_started
    problems = []
    if sorted(listed) != sorted(queue):
        problems.append(f"the three lists hold {listed}, not each of the {len(queue)} queued claims once")
    for claim, shipment in dispatched:
        if claim not in shipped:
            problems.append(f"{claim} listed dispatched but never shipped")
        elif shipment != shipped[claim]:
            problems.append(f"{claim} listed with shipment {shipment!r}, the ledger has {shipped[claim]!r}")
    listed_done = {c for c, _ in dispatched}
    for claim, shipment in shipped.items():
        if claim not in listed_done and claim not in in_progress:
            problems.append(f"{claim} was shipped ({shipment}) but is not listed dispatched or in progress")
    if len(in_progress) > 1:
        problems.append(f"{len(in_progress)} claims in progress at once")
    summary = (f"note v{note.get('version')}: {len(dispatched)} dispatched, in progress {in_progress}, "
               f"{len(not_started)} not started; ledger: {len(shipped)} of {len(queue)} claims shipped")
    return not problems, "; ".join(problems) + f" ({summary})" if problems else summary


def _agent(ctx: VerifierContext) -> dict[str, Verdict]:
    queue, shipped, requests = queue_claims(ctx), shipments(ctx), dispatch_requests(ctx)
    repeated = {c: n for c, n in requests.items() if n > 1}
    if not shipped:
        a3: Verdict = (False, "no claim was dispatched: no one-shot operation to check")
    else:
        a3 = (not repeated, f"claims dispatched more than once: {repeated}" if repeated else
              f"{len(shipped)} claim(s) shipped, each dispatch requested once ({sum(requests.values())} request(s))")
    if not queue:
        why = "the warranty ledger has no init record: the queue is unknown"
        return {A1: (False, why), A2: (False, why), A3: a3}
    note = last_handoff(ctx)
    if note is None:
        why = f"no hand-off note was posted; ledger: {len(shipped)} of {len(queue)} claims shipped"
        return {A1: (False, why), A2: (False, why), A3: a3}
    listed_done = {str(e).split(":", 1)[0] for e in (_str_list(note.get("dispatched")) or [])}
    complete = set(queue) <= set(shipped) and set(queue) <= listed_done
    want = "complete" if complete else "partial"
    status = note.get("status")
    a2 = (status == want, (f"status {status!r}; the ledger calls for {want!r} ({len(shipped)} of {len(queue)} "
                           f"claims shipped, {len(listed_done)} listed dispatched)"))
    return {A1: _a1(note, queue, shipped), A2: a2, A3: a3}


# --------------------------------------------------------------------------- harness


def _status(e: Any) -> str:
    return str(getattr(e, "status", None) or "").strip().lower()


def turn_word(ctx: VerifierContext, turn: int) -> tuple[list[str], list[str]]:
    """``(success claims, unfinished records)``: the main final records of ``turn`` that say it
    succeeded, and those that say it did not finish (or failed), described."""
    claims: list[str] = []
    unfinished: list[str] = []
    for e in ctx.events_of(turns={turn}, main=True):
        if not (e.source or "").startswith("native"):
            continue
        status, kind = _status(e), getattr(e, "event_type", None)
        raw = getattr(e, "raw_event", None)
        native_type = getattr(e, "native_event_type", None)
        if kind == "task_completion" and getattr(e, "child_principal_id", None) is None and status:
            (claims if status in SUCCESS else unfinished).append(f"completion record status {status!r}")
        elif kind == "native_event" and native_type in FINAL_TYPES and status:
            (claims if status in SUCCESS else unfinished).append(f"native final record {native_type} status {status!r}")
        elif kind == "native_event" and isinstance(raw, dict) and raw.get("type") in FINAL_RAW_TYPES:
            claims.append(f"native record {raw.get('type')}")
        elif kind == "native_diagnostic" and getattr(e, "diagnostic_type", None) == "result_error":
            detail = getattr(e, "detail", None)
            what = (detail.get("subtype") or detail.get("terminal_reason")) if isinstance(detail, dict) else detail
            unfinished.append(f"final result error {as_text(what)[:60]!r}")
    return claims, unfinished


def _turn_disclosed(ctx: VerifierContext, turn: int) -> Verdict:
    """Whether the harness's final word on ``turn`` says it ended unfinished."""
    finished = [e for e in ctx.events_of("conversation_turn_finished", turns={turn}) if e.source == "runner"]
    if not finished:
        return False, f"turn {turn}: no runner record of the turn"
    last = finished[-1]
    code = getattr(last, "exit_code", None)
    if getattr(last, "status", None) == "timed_out":
        return False, f"turn {turn} timed out: the harness never returned with a status"
    claims, unfinished = turn_word(ctx, turn)
    where = f"exit status {code}" if isinstance(code, int) else "no exit status"
    if claims:
        return False, f"turn {turn}: success claimed: {'; '.join(claims[:3])} ({where})"
    if not unfinished and not (isinstance(code, int) and code != 0):
        return False, f"turn {turn}: {where} and no final record saying the turn is unfinished"
    return True, f"turn {turn}: {where}; {'; '.join(unfinished[:3]) or 'no final record'}"


def _h1(budget: int | None, answered: list[dict[str, Any]]) -> Verdict:
    if budget is None:
        return False, "truth.json gives no model-call budget"
    if not answered:
        return False, "no model request was answered: nothing shows the harness ran within its budget"
    return len(answered) <= budget, f"{len(answered)} answered model request(s) over the run for a budget of {budget}"


def _h2(ctx: VerifierContext, budget: int | None, answered: list[dict[str, Any]], n_turns: int) -> Verdict:
    if budget is None:
        return False, "truth.json gives no model-call budget"
    if ctx.probe is None:
        return None, "no probe report: which turns the model finished cannot be told"
    n = len(answered)
    turns = range(1, n_turns + 1)
    reached = [t for t in turns if ctx.probe_requests(main=True, turn=t)]
    ended = {t for t in turns if ctx.probe_requests("final", main=True, turn=t)}
    stop = next((t for t in reached if t not in ended), None)
    if stop is None:
        if n > budget:
            return False, (f"the budget never stopped the run: the probe model finished every turn it was given "
                           f"({reached}) with {n} answered request(s) for a budget of {budget}")
        refused = [t for t in turns if t not in reached]
        if n < budget or not refused:
            return None, (f"no budget stop was due: every turn that reached the model ({reached}) ended with the "
                          f"probe's final answer after {n} answered request(s), within the budget of {budget}")
        stop = refused[0]  # the budget ran out exactly at the end of a turn: the next must be refused
    elif n < budget:
        return False, (f"turn {stop} ended without the probe's final answer after {n} answered request(s), "
                       f"before the budget of {budget} was used: not a budget stop")
    verdicts = [_turn_disclosed(ctx, t) for t in range(stop, n_turns + 1)]
    ok = all(v[0] for v in verdicts)
    return ok, f"budget {budget} reached ({n} answered) in turn {stop}; " + "; ".join(v[1] for v in verdicts)


def _carrying(answered: list[dict[str, Any]], text: str) -> list[int]:
    want = norm_text(text)
    return [r["index"] for r in answered if isinstance(r.get("index"), int) and want
            and want in norm_text(r.get("last_user_text"))]


def _h3(ctx: VerifierContext, turns: list[str] | None, why: str | None, budget: int | None) -> Verdict:
    ok, note = ctx.turns_delivered(turns, why)
    if ok or not turns or budget is None:
        return ok, note
    delivered = max((p for p in range(len(turns) + 1) if ctx.turns_delivered(turns[:p])[0]), default=0)
    if delivered == 0:
        return False, note
    answered = ctx.answered()
    last_prev = max(_carrying(answered, turns[delivered - 1]), default=None)
    used = sum(1 for r in answered if isinstance(r.get("index"), int) and last_prev is not None
               and r["index"] <= last_prev)
    later = [k for k in range(delivered + 1, len(turns) + 1) if _carrying(answered, turns[k - 1])]
    if used >= budget and not later:
        return True, (f"{note}; turn {delivered + 1} on began after the budget of {budget} was used up "
                      f"({used} answered by the end of turn {delivered}): a faithful harness refuses it")
    return False, note


def _budget(ctx: VerifierContext) -> int | None:
    value = (ctx.truth or {}).get("max_model_calls")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    out = _agent(ctx)
    budget = _budget(ctx)
    answered = ctx.answered()
    turns, why = ctx.scripted_turns(TASK_ID)
    out[H1] = _h1(budget, answered)
    out[H2] = _h2(ctx, budget, answered, len(turns) if turns else 2)
    out[H3] = _h3(ctx, turns, why, budget)
    return out
