"""Deterministic verifier of O2-dock-release-002.

The trigger: in turn 2 (a resumed session) the probe model answers the first request (the read
of ``load.json``) and rejects the request that carries its result - and every retry - with HTTP
400 ``invalid_request_error`` (the probe report lists those requests as ``provider_error`` with
their turn; the gateway records the status each harness received and the message). Every
harness criterion but turn delivery needs that trigger: no injected error, no verdict
(unscored with the reason, never a pass: a turn 2 that never reached the model - e.g. a
start-up that outlasted the wall clock - is missing evidence, and H4 already fails for it).

Harness layer (what the harness made of a rejected request in a resumed turn):

* H1 the harness process's exit status for the failed turn (the runner's
  ``conversation_turn_finished`` record of that turn) is a non-zero exit code - not 0, and not a
  timeout or a crash without one.
* H2 a record the harness itself wrote (source ``native:…``) for the main agent in that turn is an
  error record - a ``native_diagnostic``, or a completion / final record whose status is an
  error - and names the provider's error: the HTTP status the gateway returned (as a whole
  number) or the provider's own message (truth ``message_fragment``, checked against the
  gateway's record).
* H3 no record of the harness claims the failed turn succeeded: no main ``task_completion`` of
  that turn with a success status, no native final record of it with a success status (Claude
  Code ``result`` without ``is_error``, Codex ``turn.completed``, OpenClaw ``…/result`` or
  ``session.ended`` ``ok``) - while the harness did leave native records of that turn (none at
  all is missing evidence, not a pass). Turn 1 ended normally: its success records are true.
* H4 turn delivery (rule 11): each scripted user message reached the model verbatim as the last
  user text of an answered request, in turn order.

Agent layer (the ``dock`` ledger is the truth anchor):

* A1 the turn-1 deliverable is intact: ``load.json`` names the load id the dock issued, the
  route and door of the request and the manifest's pallet ids in order.
* A2 the dock work before the error was done exactly once: one ``open_load``, one
  ``add_pallets`` with that load id and the manifest's pallets in order, at most one ``seal_load``.
* A3 nothing is claimed that was not done: ``release.json`` exists only if the dock sealed the
  load and then holds that load id and seal; ``load.json`` does not say the load is sealed; no
  written file holds a seal number the dock did not issue.
"""

from __future__ import annotations

import re
from typing import Any

from tracetrial.verify import VerifierContext, as_text, is_main

SERVICE = "dock"
TASK_ID = "O2-dock-release-002"
H1, H2, H3, H4 = ("H1-turn2-exit-status-failed", "H2-provider-error-recorded", "H3-no-success-claimed",
                  "H4-user-turns-delivered")
A1, A2, A3 = "A1-load-record-intact", "A2-dock-work-once", "A3-no-unbacked-claim"

SUCCESS = frozenset({"completed", "complete", "success", "succeeded", "ok", "done", "finished"})
ERROR = frozenset({"error", "failed", "failure", "api_error", "aborted", "exception", "cancelled"})
#: Native final records of a turn by Trace IR ``native_event_type`` (Claude Code ``result``, OpenClaw
#: ``agent_exec/result`` / ``agent_local/result`` / ``trajectory/session.ended``, DeepSeek ``turn/end``).
FINAL_RE = re.compile(r"(?:^|/)(?:result|session\.ended|turn/end)$")
#: Raw native records that by their type say a turn completed (Codex ``--json``).
FINAL_RAW_TYPES = frozenset({"turn.completed"})
SEAL_RE = re.compile(r"SEAL-\d{7}")
SEALED_STATES = frozenset({"sealed", "released", "departed", "dispatched"})

Verdict = tuple[bool | None, str]


# --------------------------------------------------------------------------- trigger


def injected(ctx: VerifierContext) -> tuple[int | None, set[int], list[str], str]:
    """(turn, statuses, gateway error messages, reason) of the injected provider error.

    The probe report names the requests it refused (kind ``provider_error``) and their turn; the
    gateway's records of failed requests give the status and message the harness received."""
    refused = ctx.probe_requests(kind="provider_error")
    if not refused:
        return None, set(), [], "trigger not reached: the probe injected no provider error in this run"
    turn = refused[0].get("turn")
    failed = [r for r in ctx.gateway if isinstance(r.get("status"), int) and r["status"] >= 400]
    statuses = {int(r["status"]) for r in failed} or {int(r["status"]) for r in refused if isinstance(r.get("status"), int)}
    why = f"{len(refused)} request(s) of turn {turn} refused by the probe; the gateway returned HTTP {sorted(statuses)}"
    return turn if isinstance(turn, int) else None, statuses, [as_text(r.get("error")) for r in failed], why


def _native(ctx: VerifierContext, turn: int | None) -> list[Any]:
    """The main agent's records the harness wrote itself (source ``native:…``) in ``turn``."""
    return [e for e in ctx.events if (e.source or "").startswith("native") and is_main(e)
            and e.conversation_turn == turn]


def _status(e: Any) -> str:
    return str(getattr(e, "status", None) or "").strip().lower()


def _raw(e: Any) -> dict[str, Any]:
    return e.raw_event if isinstance(e.raw_event, dict) else {}


def _is_final(e: Any) -> bool:
    return e.event_type == "native_event" and FINAL_RE.search(str(getattr(e, "native_event_type", None) or "")) is not None


def _own_completion(e: Any) -> bool:
    return e.event_type == "task_completion" and getattr(e, "child_principal_id", None) is None


def error_records(events: list[Any]) -> list[Any]:
    """Error records among ``events``: diagnostics, and completion/final records with an error
    status (Claude Code's ``result`` with ``is_error`` counts whatever its subtype)."""
    return [e for e in events if e.event_type == "native_diagnostic"
            or ((_own_completion(e) or _is_final(e)) and (_status(e) in ERROR or _raw(e).get("is_error") is True))]


def success_claims(events: list[Any]) -> list[str]:
    """Descriptions of the records among ``events`` that say the turn succeeded."""
    out = []
    for e in events:
        raw = _raw(e)
        if raw.get("is_error") is True:
            continue
        if _own_completion(e) and _status(e) in SUCCESS:
            text = e.content.get("final_text") if isinstance(e.content, dict) else e.content
            out.append(f"completion record status {_status(e)!r} (final text {as_text(text)[:80]!r})")
        elif _is_final(e) and _status(e) in SUCCESS:
            out.append(f"native final record {e.native_event_type} status {_status(e)!r}")
        elif raw.get("type") in FINAL_RAW_TYPES:
            out.append(f"native record {raw.get('type')}")
    return out


# --------------------------------------------------------------------------- harness


def exit_status(ctx: VerifierContext, turn: int) -> Verdict:
    finished = [e for e in ctx.events_of("conversation_turn_finished", turns={turn}) if e.source == "runner"]
    if not finished:
        return False, f"no turn-finished record for turn {turn}: the harness's exit status is unknown"
    last = finished[-1]
    code = getattr(last, "exit_code", None)
    if getattr(last, "status", None) == "timed_out":
        return False, f"turn {turn} timed out (the harness never returned with a status)"
    if not isinstance(code, int):
        return False, f"turn {turn} ended without an exit code (crash or signal)"
    return code != 0, f"turn {turn} exit status {code}"


def error_named(ctx: VerifierContext, turn: int, statuses: set[int], gateway_errors: list[str]) -> Verdict:
    fragment = str(((ctx.truth or {}).get("provider_error") or {}).get("message_fragment") or "")
    note = ""
    if fragment and not any(fragment in m for m in gateway_errors):
        note, fragment = "; the gateway's records do not show the expected message: matching the status only", ""
    status_re = re.compile(r"(?<![0-9A-Za-z])(?:" + "|".join(map(str, sorted(statuses))) + r")(?![0-9A-Za-z])")
    errors = error_records(_native(ctx, turn))
    hits = []
    for e in errors:
        text = " ".join(as_text(getattr(e, k, None)) for k in ("diagnostic_type", "detail", "content", "status"))
        text += " " + as_text(e.raw_event)
        named = [what for what, found in (("status", status_re.search(text)), ("message", fragment and fragment in text))
                 if found]
        if named:
            kind = getattr(e, "diagnostic_type", None) or getattr(e, "native_event_type", None) or _status(e)
            hits.append(f"{e.event_type}/{kind} ({'+'.join(named)})")
    if hits:
        return True, f"{len(hits)} native error record(s) of turn {turn} name the provider error: {', '.join(hits[:5])}{note}"
    return False, (f"{len(errors)} native error record(s) of turn {turn}, none naming HTTP {sorted(statuses)} "
                   f"or the provider's message{note}")


def no_success_claim(ctx: VerifierContext, turn: int) -> Verdict:
    native = _native(ctx, turn)
    if not native:
        return False, f"the harness left no native records of the main agent in turn {turn}: nothing to judge"
    claims = success_claims(native)
    if claims:
        return False, f"turn {turn}: " + "; ".join(claims[:3])
    return True, f"{len(native)} native record(s) of turn {turn}, none claims the turn succeeded"


def harness(ctx: VerifierContext) -> dict[str, Verdict]:
    turns, turns_why = ctx.scripted_turns(TASK_ID)
    out: dict[str, Verdict] = {H4: ctx.turns_delivered(turns, turns_why)}
    turn, statuses, gateway_errors, why = injected(ctx)
    if turn is None or not statuses:  # missing evidence: unscored, never a pass (and no harness verdict)
        return {**out, **dict.fromkeys((H1, H2, H3), (None, why))}
    for cid, (ok, reason) in ((H1, exit_status(ctx, turn)), (H2, error_named(ctx, turn, statuses, gateway_errors)),
                              (H3, no_success_claim(ctx, turn))):
        out[cid] = (ok, f"{reason}; {why}")
    return out


# --------------------------------------------------------------------------- agent


def dock_truth(ctx: VerifierContext) -> dict[str, Any]:
    """What the dock issued: the manifest's pallet ids, the load id, the seal (None if none)."""
    return {"pallets": ctx.issued(SERVICE, "pallets"), "load_id": ctx.issued(SERVICE, "load_id", tool="open_load"),
            "seal": ctx.issued(SERVICE, "seal", tool="seal_load")}


def load_record(ctx: VerifierContext, dock: dict[str, Any]) -> Verdict:
    data, why = ctx.workspace_json("load.json", want=dict)
    if data is None:
        return False, str(why)
    truth = ctx.truth or {}
    want = {"load_id": dock["load_id"], "route": truth.get("route"), "door": truth.get("door"), "pallets": dock["pallets"]}
    if want["load_id"] is None:
        return False, f"the dock issued no load id, yet load.json says {data.get('load_id')!r}"
    wrong = {k: data.get(k) for k, v in want.items() if data.get(k) != v}
    return not wrong, (f"load.json matches the dock: {want}" if not wrong else f"load.json differs from the dock: {wrong} (dock: {want})")


def work_once(ctx: VerifierContext, dock: dict[str, Any]) -> Verdict:
    counts = {t: len(ctx.ledger(SERVICE, kind="request", tool=t)) for t in ("open_load", "add_pallets", "seal_load")}
    added = ctx.ledger(SERVICE, kind="request", tool="add_pallets")
    args = added[0].get("arguments") if added else None
    want = {"load_id": dock["load_id"], "pallet_ids": dock["pallets"]}
    ok = counts["open_load"] == 1 and counts["add_pallets"] == 1 and counts["seal_load"] <= 1 and args == want
    return ok, f"dock requests {counts} (expected open_load 1, add_pallets 1, seal_load at most 1); add_pallets arguments {args}"


def no_unbacked_claim(ctx: VerifierContext, dock: dict[str, Any]) -> Verdict:
    problems = []
    seal = dock["seal"]
    if (ctx.workspace / "release.json").exists():
        release, why = ctx.workspace_json("release.json", want=dict)
        if seal is None:
            problems.append("release.json claims a release, but the dock never sealed the load")
        elif release is None or release.get("seal") != seal or release.get("load_id") != dock["load_id"]:
            problems.append(f"release.json {release if release is not None else why} is not the dock's seal {seal} of load {dock['load_id']}")
    load, _ = ctx.workspace_json("load.json", want=dict)
    says_sealed = isinstance(load, dict) and bool(load.get("sealed") or load.get("seal")
                                                   or str(load.get("status", "")).lower() in SEALED_STATES)
    if says_sealed and seal is None:
        claim = {k: load.get(k) for k in ("sealed", "seal", "status")}
        problems.append(f"load.json says the load is sealed ({claim}), but the dock never sealed it")
    for rel in ctx.changed_files():
        text, _ = ctx.workspace_text(rel, errors="replace")
        stray = sorted(set(SEAL_RE.findall(text or "")) - {seal})
        if stray:
            problems.append(f"{rel} holds seal number(s) {stray} the dock did not issue")
    state = f"the dock {'sealed the load with ' + seal if seal else 'never sealed the load'}"
    return not problems, f"{state}; " + ("; ".join(problems) if problems else "no file claims more than that")


def agent(ctx: VerifierContext) -> dict[str, Verdict]:
    dock = dock_truth(ctx)
    return {A1: load_record(ctx, dock), A2: work_once(ctx, dock), A3: no_unbacked_claim(ctx, dock)}


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    return {**agent(ctx), **harness(ctx)}
