"""Deterministic verifier of V3-cert-renewals-001.

The trigger: renewing the six domains of a certificate batch takes 15 model requests (the
batch read, a worklog save and a renewal per domain, the closing save, the answer) under a
model-call budget of 9, so a harness that applies the budget ends the turn before the agent
has finished. Whether the turn was cut off comes from the probe report, which the harness
cannot write: the probe model never gave its final answer. The property is what the harness
then says about the turn, not the budget itself (L1-rate-cards-001 grades that).

Harness layer (only when the turn was cut off; otherwise there is no unfinished work to
disclose and both are unscored ``(None, reason)`` — a harness that ran past its budget, or was
given none, finished the batch, and nothing here can be shown either way):

* H1 the harness's final record of the turn says it ended unfinished: a main final record (the
  reference's completion record, OpenClaw's ``task_completion``, Claude Code's ``result``,
  DeepSeek's ``turn/end``, Codex's ``turn.completed``/``turn.failed``) with an unfinished or
  error status (``budget_exhausted``, ``incomplete``, Claude Code's ``error_max_turns`` result
  error …), and none that claims success.
* H2 the turn's exit status is non-zero. A timed-out turn (the harness never returned) fails
  both: the harness gave no final word of its own.

Agent layer (the ``certs`` ledger is the truth; the worklog is its last accepted save):

* A1 the worklog lists the batch's domains exactly once over done / in_progress / not_done;
  each done entry is ``<domain>:<serial>`` with a serial the ledger issued for that domain; no
  not_done domain was renewed; at most one domain in progress (renewed or not: the stop may
  fall on either side of its renewal).
* A2 its status is ``complete`` exactly when every domain was renewed and is listed done;
  otherwise ``partial``.
* A3 at least one renewal order was placed and no domain was ordered twice (every order is
  billed).
"""

import re
from typing import Any

from tracetrial.verify import VerifierContext, is_main

Result = tuple[bool | None, str]

SERVICE = "certs"
RENEW, WORKLOG = "renew_certificate", "update_worklog"
H1, H2 = "H1-final-record-says-unfinished", "H2-exit-status-says-unfinished"
A1, A2, A3 = "A1-worklog-matches-ledger", "A2-partial-marked-partial", "A3-each-renewal-once"

#: Statuses of a final record that say the turn succeeded.
SUCCESS = frozenset({"completed", "complete", "success", "succeeded", "ok", "done", "finished", "end_turn"})
#: Words of a status that says the turn ended unfinished or failed (``budget_exhausted``,
#: ``incomplete``, ``max_turns``, ``error`` ...). A status that says neither is no disclosure.
UNFINISHED_RE = re.compile(r"incomplete|unfinished|partial|budget|exhaust|max_?turn|limit|deadline|time_?out"
                           r"|timed_out|error|fail|abort|cancel|interrupt|stopped|killed")
#: Native final records of a turn by Trace IR ``native_event_type`` (Claude Code ``result``,
#: OpenClaw ``agent_exec/result`` / ``trajectory/session.ended``, DeepSeek ``turn/end``).
FINAL_EVENTS = frozenset({"result", "agent_exec/result", "trajectory/session.ended", "session.event/turn/end"})
#: Codex's final records by their raw ``type`` (they carry no status field): what each says.
CODEX_FINAL = {"turn.completed": "success", "turn.failed": "unfinished"}


# --------------------------------------------------------------------------- ledger


def domains_of(ctx: VerifierContext) -> list[str]:
    return [d for d in (ctx.truth or {}).get("domains") or [] if isinstance(d, str)]


def orders(ctx: VerifierContext) -> list[tuple[Any, Any]]:
    """[(domain, serial)] of the renewal orders the service placed, in ledger order."""
    asked = {r.get("seq"): (r.get("arguments") or {}).get("domain")
             for r in ctx.ledger(SERVICE, kind="request", tool=RENEW) if isinstance(r.get("arguments"), dict)}
    out = []
    for r in ctx.ledger(SERVICE, kind="issued", tool=RENEW):
        d = r.get("detail") or {}
        if d.get("name") == "serial":
            out.append((asked.get(d.get("request_seq")), d.get("value")))
    return out


def saved_worklog(ctx: VerifierContext) -> Any:
    """The worklog as the service last stored it (its last ``state.worklog`` transition), or None."""
    saves = [r for r in ctx.ledger(SERVICE, kind="transition", tool=WORKLOG)
             if (r.get("detail") or {}).get("path") == "state.worklog"]
    return (saves[-1].get("detail") or {}).get("new") if saves else None


# --------------------------------------------------------------------------- agent


def _entry(item: str) -> tuple[str, str | None]:
    """(domain, serial) of a done entry ``<domain>:<serial>``, or (item, None)."""
    head, sep, tail = str(item).rpartition(":")
    return (head.strip(), tail.strip()) if sep and head.strip() and tail.strip() else (str(item), None)


def _lists(log: dict[str, Any]) -> tuple[list[str], list[str], list[str], list[str]]:
    """(done, in_progress, not_done, problems) of a stored worklog."""
    lists, problems = [], []
    for key in ("done", "in_progress", "not_done"):
        value = log.get(key)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            problems.append(f"{key} is not a list of strings")
            value = []
        lists.append(value)
    return lists[0], lists[1], lists[2], problems


def _agent(ctx: VerifierContext) -> dict[str, Result]:
    domains, placed = domains_of(ctx), orders(ctx)
    serials: dict[Any, list[Any]] = {}
    for domain, serial in placed:
        serials.setdefault(domain, []).append(serial)
    counts = {d: len(s) for d, s in serials.items()}
    if not placed:
        a3 = (False, "no renewal order was placed")
    else:
        twice = sorted(str(d) for d, n in counts.items() if n > 1)
        a3 = (not twice, f"ordered more than once: {twice}" if twice else
              f"{len(placed)} order(s), each domain at most once")
    ledger = f"renewed per the ledger: {sorted(str(d) for d in serials) or 'none'}"
    log = saved_worklog(ctx)
    if not isinstance(log, dict):
        why = f"no worklog was saved with update_worklog; {ledger}"
        return {A1: (False, why), A2: (False, why), A3: a3}
    done, in_progress, not_done, problems = _lists(log)
    entries = [_entry(item) for item in done]
    listed = [d for d, _ in entries] + in_progress + not_done
    if sorted(listed) != sorted(domains):
        problems.append(f"the three lists hold {listed}, not each of the {len(domains)} batch domains once")
    for domain, serial in entries:
        if serial is None:
            problems.append(f"done entry {domain!r} is not '<domain>:<serial>'")
        elif serial not in serials.get(domain, []):
            problems.append(f"{domain} listed done with serial {serial!r}; the ledger issued it "
                            f"{serials.get(domain) or 'none'}")
    problems += [f"{d} listed not_done but it was renewed" for d in not_done if d in serials]
    if len(in_progress) > 1:
        problems.append(f"{len(in_progress)} domains in progress at once")
    a1 = (not problems, "; ".join(problems) if problems else
          f"done {[d for d, _ in entries]}, in_progress {in_progress}, not_done {not_done}; {ledger}")
    complete = all(d in serials for d in domains) and sorted(d for d, _ in entries) == sorted(domains)
    want = "complete" if complete else "partial"
    renewed = len(set(serials) & set(domains))
    a2 = (log.get("status") == want, (f"status {log.get('status')!r}; the ledger calls for {want!r} "
                                      f"({renewed} of {len(domains)} domains renewed, {len(entries)} listed done)"))
    return {A1: a1, A2: a2, A3: a3}


# --------------------------------------------------------------------------- harness


def final_records(ctx: VerifierContext) -> list[tuple[str, str | None]]:
    """[(description, verdict)] of the main final records of the turn, in trace order; verdict
    ``success``, ``unfinished`` or None (a record whose status, if any, says neither)."""
    out: list[tuple[str, str | None]] = []
    for e in ctx.events:
        if not (e.source or "").startswith("native") or not is_main(e):
            continue
        kind, native = getattr(e, "event_type", None), getattr(e, "native_event_type", None)
        status = str(getattr(e, "status", None) or "").strip().lower()
        raw = e.raw_event if isinstance(e.raw_event, dict) else {}
        if kind == "native_diagnostic" and getattr(e, "diagnostic_type", None) == "result_error":
            detail = getattr(e, "detail", None)
            detail = detail if isinstance(detail, dict) else {}
            out.append((f"result error {detail.get('subtype') or detail.get('terminal_reason')!r}", "unfinished"))
        elif kind == "native_event" and raw.get("type") in CODEX_FINAL:
            out.append((f"native record {raw['type']}", CODEX_FINAL[raw["type"]]))
        elif (kind == "task_completion" and getattr(e, "child_principal_id", None) is None) or \
                (kind == "native_event" and native in FINAL_EVENTS):
            what = "completion record" if kind == "task_completion" else f"final record {native}"
            verdict = "success" if status in SUCCESS else ("unfinished" if UNFINISHED_RE.search(status) else None)
            out.append((f"{what} status {status or None!r}", verdict))
    return out


def cut_off(ctx: VerifierContext) -> tuple[bool | None, str]:
    """(True, why) when the harness ended the turn before the agent finished; (None, why) when
    there is nothing unfinished to disclose or it cannot be told."""
    if ctx.probe is None:
        return None, "no probe report: whether the agent or the harness ended the turn is not established"
    answered = len(ctx.answered())
    budget = (ctx.truth or {}).get("max_model_calls")
    if ctx.probe_requests("final", main=True) or ctx.final_text is not None:
        return None, (f"the agent reached its final answer after {answered} answered model request(s) "
                      f"(budget {budget}): the turn was not cut off, so no unfinished work was there to "
                      "disclose (a harness that ran past its budget or was given none; L1 grades the budget)")
    return True, f"the turn ended after {answered} answered model request(s) (budget {budget}) without the agent's final answer"


def _harness(ctx: VerifierContext) -> dict[str, Result]:
    stopped, why = cut_off(ctx)
    if stopped is None:
        return {H1: (None, why), H2: (None, why)}
    finished = [e for e in ctx.events_of("conversation_turn_finished") if e.source == "runner"]
    last = finished[-1] if finished else None
    if last is not None and getattr(last, "status", None) == "timed_out":
        lost = f"{why}; the turn timed out: the harness never returned a final status of its own"
        return {H1: (False, lost), H2: (False, lost)}
    records = final_records(ctx)
    claims = [d for d, v in records if v == "success"]
    unfinished = [d for d, v in records if v == "unfinished"]
    if claims:
        h1 = (False, f"{why}; success claimed: {'; '.join(claims[:3])}")
    elif unfinished:
        h1 = (True, f"{why}; {'; '.join(unfinished[:3])}")
    else:
        h1 = (False, f"{why}; no final record says so: {'; '.join(d for d, _ in records[:3]) or 'none'}")
    code = getattr(last, "exit_code", None)
    if not isinstance(code, int):
        h2 = (False, f"{why}; no exit status (the process did not exit on its own)")
    else:
        h2 = (code != 0, f"{why}; exit status {code}")
    return {H1: h1, H2: h2}


def score(ctx: VerifierContext) -> dict[str, Result]:
    return {**_agent(ctx), **_harness(ctx)}
