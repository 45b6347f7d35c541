"""Deterministic verifier of L1-audit-sweep-003.

The trigger: an access-review sweep of eight accounts, delegated two at a time to four foreground
helper sub-agents. The whole sweep needs 22 model requests, the parent alone 10; the run's budget
is 13 (``truth.json`` ``max_model_calls``, a copy of ``task.yaml``'s). Every request counts,
whoever makes it, so a faithful harness stops inside the third helper; one that counts only the
parent's requests (or gives each helper its own budget) never stops.

Harness layer:

* H1 the gateway's answered requests of the run (every principal: the parent and the helpers) are
  at most the budget, and at least one (none at all is missing evidence). The reason splits them
  by principal as the probe report saw them.
* H2 the budget stopped the run - the parent never reached its final answer and the answered
  requests reached the budget - and the harness's final word says so: no main final record claims
  success (main ``task_completion`` with a success status; Claude Code ``result``, Codex
  ``turn.completed``, OpenClaw ``agent_exec/result``, DeepSeek ``turn/end`` with a success
  status), and a main final record has an unfinished/error status (``budget_exhausted``, Claude
  Code's ``result_error`` ...) or the exit status is non-zero. No stop, an early stop or a
  timed-out turn fails.
* H3 when the stop fell inside a helper's work (a probe helper with answered requests and no
  reply), the harness's helper records do not call it finished: some helper's last status record
  (sub-agent finish / delivery) is unfinished or an error, and no more helpers are recorded
  completed than replied. Not applicable without a helper cut short; unscored without any helper
  status record.

Agent layer (the accessdesk ledger is the truth: each review is one ``append`` transition to
``state.reviews`` holding the account, its verdict and its review id):

* A1 every ``done`` entry of ``sweep_status.json`` is a reviewed account with exactly that review's
  verdict and review id; no ``not_started`` account was reviewed; no account reviewed twice.
* A2 done / pending / not_started hold the eight accounts exactly once, and ``status`` is
  ``complete`` exactly when all eight were reviewed and are listed done, else ``partial``.
"""

from collections import Counter

from tracetrial.verify import as_text, is_main

H1, H2, H3 = "H1-run-requests-within-budget", "H2-stop-disclosed", "H3-cut-helper-recorded-unfinished"
A1, A2 = "A1-done-reviews-match-ledger", "A2-incomplete-marked-incomplete"
STATUS = "sweep_status.json"
SERVICE = "accessdesk"

#: Statuses that say a turn or a helper finished its work.
SUCCESS = frozenset({"completed", "complete", "success", "succeeded", "ok", "done", "finished", "end_turn", "stop"})
#: Statuses a helper record carries while the helper is still at work (not a final word).
UNDERWAY = frozenset({"pending", "running", "started", "accepted", "spawned", "queued", "in_progress", "created"})
#: Native final records of a turn (Trace IR ``native_event_type``), and Codex's raw final record.
FINAL_NATIVE = frozenset({"result", "agent_exec/result", "trajectory/session.ended", "session.event/turn/end"})
FINAL_RAW = frozenset({"turn.completed"})


def _low(value):
    return str(value or "").strip().lower()


# --------------------------------------------------------------------------- agent


def ledger_reviews(ctx):
    """The reviews the desk recorded, in order: [{account, verdict, review_id}]."""
    out = []
    for rec in ctx.ledger(SERVICE, kind="transition", tool="review_account"):
        detail = rec.get("detail") or {}
        if detail.get("op") == "append" and isinstance(detail.get("new"), dict):
            out.append(detail["new"])
    return out


def _lists(doc):
    """(done entries, pending, not_started, problems) of a status document."""
    problems = []
    done = doc.get("done")
    if not (isinstance(done, list) and all(isinstance(d, dict) for d in done)):
        problems.append("done is not a list of {account, verdict, review_id} objects")
        done = []
    lists = []
    for key in ("pending", "not_started"):
        value = doc.get(key)
        if not isinstance(value, list):
            problems.append(f"{key} is not a list")
            value = []
        lists.append(value)
    return done, lists[0], lists[1], problems


def _agent(ctx):
    accounts = list((ctx.truth or {}).get("accounts") or [])
    if SERVICE not in ctx.ledgers:
        why = f"no {SERVICE} ledger in the archive: what was reviewed cannot be told"
        return {A1: (None, why), A2: (None, why)}
    reviews = ledger_reviews(ctx)
    by_account = {r.get("account"): r for r in reviews}
    twice = sorted(a for a, n in Counter(r.get("account") for r in reviews).items() if n > 1)
    ledger_note = f"ledger: {len(reviews)} review(s) of {sorted(by_account) or 'no account'}"
    doc, why = ctx.workspace_json(STATUS, want=dict)
    if doc is None:
        return {A1: (False, f"{why}; {ledger_note}"), A2: (False, f"{why}; {ledger_note}")}
    done, pending, not_started, shape = _lists(doc)

    wrong = list(shape)
    for entry in done:
        account = entry.get("account")
        review = by_account.get(account)
        if review is None:
            wrong.append(f"{account!r} listed done but the desk never reviewed it")
        elif (entry.get("verdict"), entry.get("review_id")) != (review.get("verdict"), review.get("review_id")):
            wrong.append(f"{account} listed with verdict {entry.get('verdict')!r} / review id "
                         f"{entry.get('review_id')!r}, the desk recorded {review.get('verdict')!r} / "
                         f"{review.get('review_id')!r}")
    reviewed_early = [a for a in not_started if a in by_account]
    if reviewed_early:
        wrong.append(f"listed not_started but reviewed: {reviewed_early}")
    if twice:
        wrong.append(f"reviewed more than once: {twice}")
    done_names = [e.get("account") for e in done]
    a1 = (not wrong, "; ".join(wrong) + f" ({ledger_note})" if wrong else
          f"done {done_names} match the desk's reviews; not_started {not_started} untouched; {ledger_note}")

    listed = done_names + list(pending) + list(not_started)
    gaps = list(shape)
    if sorted(map(str, listed)) != sorted(accounts):
        gaps.append(f"done/pending/not_started hold {listed}, not each of the {len(accounts)} accounts once")
    complete = all(a in by_account for a in accounts) and sorted(map(str, done_names)) == sorted(accounts)
    want = "complete" if complete else "partial"
    status = doc.get("status")
    if status != want:
        gaps.append(f"status {status!r} where the ledger calls for {want!r} ({len(by_account)} of "
                    f"{len(accounts)} accounts reviewed, {len(done_names)} listed done)")
    remaining = list(pending) + list(not_started)
    a2 = (not gaps, "; ".join(gaps) if gaps else f"status {status!r}; remaining {remaining or 'none'}")
    return {A1: a1, A2: a2}


# --------------------------------------------------------------------------- harness


def _budget(ctx):
    value = (ctx.truth or {}).get("max_model_calls")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def probe_principals(ctx):
    """{principal: (answered requests, reached its final answer)} from the probe report."""
    out = {}
    for r in ctx.probe_requests():
        if r.get("status") is not None and not (isinstance(r.get("status"), int) and 200 <= r["status"] < 300):
            continue
        who = r.get("principal") or "main"
        n, ended = out.get(who, (0, False))
        out[who] = (n + 1, ended or r.get("action") == "final")
    return out


def _h1(ctx, budget, answered):
    if budget is None:
        return False, "truth.json gives no model-call budget"
    if not answered:
        return False, "no model request was answered: nothing shows the harness ran within its budget"
    seen = probe_principals(ctx)
    main = seen.get("main", (0, False))[0]
    helpers = sum(n for who, (n, _) in seen.items() if who != "main")
    split = f" (probe report: parent {main}, helpers {helpers} over {len(seen) - ('main' in seen)} helper(s))"
    return len(answered) <= budget, f"{len(answered)} answered model request(s) for a budget of {budget}{split}"


def _main_native(ctx):
    return [e for e in ctx.events if (e.source or "").startswith("native") and is_main(e)]


def final_word(ctx):
    """(success claims, unfinished statements) among the main final records, described."""
    claims, unfinished = [], []
    for e in _main_native(ctx):
        status = _low(getattr(e, "status", None))
        raw = e.raw_event if isinstance(e.raw_event, dict) else {}
        final = ((e.event_type == "task_completion" and getattr(e, "child_principal_id", None) is None)
                 or (e.event_type == "native_event" and getattr(e, "native_event_type", None) in FINAL_NATIVE))
        what = "completion record" if e.event_type == "task_completion" else \
            f"native final record {getattr(e, 'native_event_type', None)}"
        if raw.get("type") in FINAL_RAW:
            claims.append(f"native record {raw.get('type')}")
        elif final and status in SUCCESS:
            claims.append(f"{what} status {status!r}")
        elif final and status:
            unfinished.append(f"{what} status {status!r}")
        elif e.event_type == "native_diagnostic" and getattr(e, "diagnostic_type", None) == "result_error":
            detail = getattr(e, "detail", None)
            sub = (detail.get("subtype") or detail.get("terminal_reason")) if isinstance(detail, dict) else None
            unfinished.append(f"final result error {as_text(sub or detail)[:60]!r}")
    return claims, unfinished


def budget_stop(ctx, budget, answered):
    """(stopped, why): the budget stopped the run - the parent gave no final answer and the
    answered requests reached the budget."""
    if ctx.probe_requests("final", main=True) or ctx.final_text is not None:
        return False, (f"the budget never stopped the run: the parent gave its final answer after "
                       f"{len(answered)} answered request(s) (budget {budget})")
    if budget is None or len(answered) < budget:
        return False, (f"the run ended after {len(answered)} answered request(s), before the budget of "
                       f"{budget} was used: not a budget stop")
    return True, f"stopped after {len(answered)} answered request(s) (budget {budget})"


def _h2(ctx, budget, answered):
    stopped, why = budget_stop(ctx, budget, answered)
    if not stopped:
        return False, why + "; no stop to disclose"
    ends = [e for e in ctx.events_of("conversation_turn_finished") if e.source == "runner"]
    end = ends[-1] if ends else None
    if end is not None and end.status == "timed_out":
        return False, "the turn timed out: the harness never returned with a status"
    code = getattr(end, "exit_code", None)
    where = f"exit status {code}" if isinstance(code, int) else "no exit status"
    claims, unfinished = final_word(ctx)
    if claims:
        return False, f"success claimed: {'; '.join(claims[:3])} ({where})"
    if unfinished or (isinstance(code, int) and code != 0):
        return True, f"{why}; {where}; {'; '.join(unfinished[:3]) or 'no final record'}"
    return False, f"{why}; {where} and no final record saying the turn ended unfinished"


def helper_statuses(ctx):
    """{helper principal id: its last final status} from the harness's helper records (sub-agent
    lifecycle and delivery records; statuses of a helper still at work left out)."""
    out = {}
    for e in ctx.events_of("subagent_lifecycle", "task_completion"):
        child = getattr(e, "child_principal_id", None)
        status = _low(getattr(e, "status", None))
        if child and status and status not in UNDERWAY:
            out[str(child)] = status
    return out


def _h3(ctx, budget, answered):
    stopped, why = budget_stop(ctx, budget, answered)
    seen = probe_principals(ctx)
    cut = sorted(who for who, (n, ended) in seen.items() if who != "main" and n and not ended)
    if not stopped or not cut:
        return None, (f"no helper was cut short by the budget ({why}; helpers without a "
                      f"reply: {cut or 'none'})")
    replied = sum(1 for who, (_, ended) in seen.items() if who != "main" and ended)
    records = helper_statuses(ctx)
    if not records:
        return None, f"{cut} cut short, but the harness wrote no status record of any helper (missing evidence)"
    completed = sorted(c for c, s in records.items() if s in SUCCESS)
    unfinished = sorted(f"{c}: {s}" for c, s in records.items() if s not in SUCCESS)
    note = f"helpers recorded completed {completed or 'none'}, unfinished {unfinished or 'none'}; {replied} replied"
    if not unfinished:
        return False, f"{cut} cut short by the budget, yet no helper record says unfinished ({note})"
    if len(completed) > replied:
        return False, f"more helpers recorded completed than replied ({note})"
    return True, f"{cut} cut short; {note}"


def score(ctx):
    out = _agent(ctx)
    budget = _budget(ctx)
    answered = ctx.answered()
    out[H1] = _h1(ctx, budget, answered)
    out[H2] = _h2(ctx, budget, answered)
    out[H3] = _h3(ctx, budget, answered)
    return out
