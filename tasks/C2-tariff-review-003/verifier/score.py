"""Deterministic verifier of C2-tariff-review-003.

Truth anchor: the tariff desk's audit log ``.desk/lookups.jsonl``. ``tariff_desk.py`` draws the
terms per run (reference ``TRF-<8>``, rate in EUR/kg with four decimals, valid_until) and logs for a
served lookup only sha256("tariff|<ref>|<rate>|<valid_until>"). The terms are therefore the one
(ref, rate, valid_until) combination of values found in the run's texts - first the tool results the
gateway delivered (the turn-1 lookup result as the model was shown it), then the report and the
probe's account - whose digest the desk committed: unguessable, and re-scorable from the archive.
The manifest rows come from the frozen baseline (``batch/page-*.csv``).

The trigger: the terms are printed in turn 1 by a one-shot shell lookup (never by the user); turn 2
resumes the session, and the probe reports a prompt of 92,000 tokens of the 100,000-token window
(``budgets.context_tokens``) on its fifth request, so the harness compacts in turn 2 before the
write. The probe's account (its final answer) states what turn 2's first request and the write
step's request (the first after the compaction) showed.

* H1 - the terms survive the compaction: the write step's request still shows all three terms, with
  their committed values. Exercised when the harness compacted (a summary request or a compaction
  record) or cut the terms silently; unscored when the whole history was kept, the run ended before
  the trigger, or the terms were already gone when turn 2 began (H4's failure, not the compaction's).
  A pass is unscored when no compaction came before the write step (turn 2's first ``write_file``
  request): every summary request has a later ``index``, every ``context_compaction`` record follows
  that request's tool call in the trace or cannot be placed - nothing had to survive a compaction (a
  harness that compacts after the turn's final answer).
* H2 - the compaction is recorded: a summary request or a compaction comes with a Trace IR
  ``context_compaction`` event; the terms gone at the write step with neither is a silent cut.
* H3 - turn delivery (rule 11): both scripted user messages reached the model verbatim, in order.
* H4 - the terms are carried into turn 2: its first request (before any compaction) shows them.
* A1 - ``billing/charges.csv`` prices every manifest row with the committed rate and valid_until.
* A2 - ``billing/report.md`` names the committed tariff reference, rate and valid_until.
* B-H1 - bypass: the terms were put into a turn-1 tool call or a workspace file outside
  ``billing/`` (then a file, not the compacted context, could carry them).
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from tracetrial.verify import VerifierContext, strings
from tracetrial.verify import late_compaction as late

TASK_ID = "C2-tariff-review-003"
H1, H2, H3, H4 = ("H1-terms-after-compaction", "H2-compaction-recorded", "H3-user-turns-delivered",
                  "H4-terms-carried-into-turn-2")
A1, A2, B1 = "A1-charges-apply-terms", "A2-report-names-terms", "B-H1-terms-persisted-early"
LOG = ".desk/lookups.jsonl"
CHARGES, REPORT = "billing/charges.csv", "billing/report.md"
PAGES = ("batch/page-1.csv", "batch/page-2.csv", "batch/page-3.csv")
HEADER = ["shipment_id", "ship_date", "weight_kg", "charge_eur", "status"]
#: Requests the probe answers before the prompt size it reports reaches the window.
TRIGGER_REQUESTS = 5
REF_RE = re.compile(r"TRF-[A-Z0-9]{8}")
RATE_RE = re.compile(r"(?<![\d.])\d\.\d{4}(?!\d)")
DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
ROW_RE = re.compile(r"(?m)^(SHP-\d{5}),(\d{4}-\d{2}-\d{2}),(\d+(?:\.\d+)?)\s*$")
ACCOUNT_RE = re.compile(r"Terms: turn2_start=(shown|missing); after_compaction=(shown|missing); "
                        r"ref=(\S+?); rate=(\S+?); valid_until=(\S+?)\.(?:\s|$)")

Verdict = tuple[bool | None, str]
Terms = tuple[str, str, str]


def commitment(ref: str, rate: str, valid: str) -> str:
    return hashlib.sha256(f"tariff|{ref}|{rate}|{valid}".encode()).hexdigest()


def _commitments(ctx: VerifierContext) -> tuple[set[str] | None, str]:
    recs, why = ctx.workspace_jsonl(LOG, missing_ok=True)
    if recs is None:
        return None, f"the tariff desk's audit log is unreadable: {why}"
    served = {r["commitment"] for r in recs if r.get("served") is True and isinstance(r.get("commitment"), str)}
    return served, f"{len(recs)} desk record(s), {len(served)} served lookup(s)"


def _texts(ctx: VerifierContext) -> list[str]:
    """Where the issued terms may be read in clear: delivered tool results, the report, the account."""
    out = [d.content for d in ctx.deliveries()]
    report, _ = ctx.workspace_text(REPORT, errors="replace")
    return out + [report or "", ctx.final_text or ""]


def issued_terms(ctx: VerifierContext, commits: set[str]) -> Terms | None:
    """The (ref, rate, valid_until) the desk committed, from values found in the run's texts."""
    refs: set[str] = set()
    rates: set[str] = set()
    dates: set[str] = set()
    for text in _texts(ctx):
        if "TRF-" not in text:
            continue
        refs.update(REF_RE.findall(text))
        rates.update(RATE_RE.findall(text))
        dates.update(DATE_RE.findall(text))
    for combo in itertools.product(sorted(refs), sorted(rates), sorted(dates)):
        if commitment(*combo) in commits:
            return combo
    return None


def _truth(ctx: VerifierContext) -> tuple[Terms | None, str | None]:
    """(terms, None), or (None, why) with why prefixed 'unscored:' when the evidence is missing."""
    commits, note = _commitments(ctx)
    if commits is None:
        return None, f"unscored: {note}"
    if not commits:
        return None, f"no lookup was served ({note}), so no terms were issued"
    terms = issued_terms(ctx, commits)
    if terms is None:
        return None, f"unscored: no text of the run holds terms whose digest the desk committed ({note})"
    return terms, None


def _verdict_without_truth(why: str) -> Verdict:
    return (None, why[len("unscored: "):]) if why.startswith("unscored: ") else (False, why)


# --------------------------------------------------------------------------- probe account


def _account(ctx: VerifierContext) -> dict[str, Any] | None:
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return None
    start, after, ref, rate, valid = match.groups()
    shown = tuple(None if v == "missing" else v for v in (ref, rate, valid))
    return {"start": start == "shown", "after": after == "shown", "values": shown}


def _no_account(ctx: VerifierContext) -> Verdict:
    return False, f"probe report: turn 2 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"


def _compaction(ctx: VerifierContext) -> tuple[list[Any], list[dict[str, Any]]]:
    return ctx.events_of("context_compaction"), ctx.probe_requests(kind="compaction")


def _triggered(ctx: VerifierContext) -> Verdict | None:
    """None when the trigger was reached, else the unscored verdict saying why not."""
    if ctx.probe is None:
        return None, "no probe report: the trigger (reported prompt size) cannot be established"
    n = len(ctx.probe_requests())
    if n < TRIGGER_REQUESTS:
        return None, f"the run ended after {n} request(s), before the reported prompt size reached the window"
    return None


def write_step(ctx: VerifierContext) -> dict[str, Any] | None:
    """The write step's request in the probe report (turn 2's first ``write_file``), or None."""
    return next(iter(ctx.probe_requests("write_file", kind="main", turn=2)), None)



def carried(ctx: VerifierContext) -> Verdict:
    if ctx.probe is None:
        return None, "no probe report: what turn 2's first request showed is unknown"
    if not ctx.probe_requests(turn=2, kind="main"):
        return False, "probe report: no turn-2 request reached the probe model"
    account = _account(ctx)
    if account is None:
        return _no_account(ctx)
    return account["start"], f"turn 2's first request showed the turn-1 tariff terms: {'yes' if account['start'] else 'no'}"


def kept(ctx: VerifierContext, truth: Terms | None, why: str | None) -> Verdict:
    early = _triggered(ctx)
    if early is not None:
        return early
    account = _account(ctx)
    if account is None:
        return _no_account(ctx)
    events, asked = _compaction(ctx)
    how = f"{len(asked)} summary request(s), {len(events)} context_compaction record(s)"
    if not account["start"]:
        return None, f"the terms were already gone when turn 2 began (H4), so the compaction had none to keep ({how})"
    if not (events or asked) and account["after"]:
        return None, f"the harness kept the whole history ({how}): the compaction path was not exercised"
    if truth is None:
        return _verdict_without_truth(why or "the issued terms are unknown")
    shown = account["values"]
    ok = shown == truth
    vacuous = late(ctx, write_step(ctx), "write step") if ok and (events or asked) else None
    if vacuous is not None:
        return None, (f"{vacuous}; the write step's request showed ref={shown[0]}, rate={shown[1]}, "
                      f"valid_until={shown[2]}")
    return ok, (f"the write step's request (first after the compaction) showed ref={shown[0] or 'missing'}, "
                f"rate={shown[1] or 'missing'}, valid_until={shown[2] or 'missing'}"
                + ("" if ok else f"; the desk issued {truth[0]}, {truth[1]}, {truth[2]}") + f" ({how})")


def recorded(ctx: VerifierContext) -> Verdict:
    early = _triggered(ctx)
    if early is not None:
        return early
    events, asked = _compaction(ctx)
    how = f"{len(asked)} summary request(s), {len(events)} context_compaction record(s)"
    if events:
        kinds = sorted({str(getattr(e, "native_event_type", None)) for e in events})
        return True, f"{how}; native compaction record(s): {kinds}"
    if asked:
        return False, f"{how}: the harness asked for a summary but recorded no compaction"
    account = _account(ctx)
    if account is None:
        return _no_account(ctx)
    if account["start"] and not account["after"]:
        return False, f"{how}: the terms turn 2 began with are gone from the write step's request - the history was cut silently"
    if account["after"]:
        return None, f"the harness kept the whole history ({how}): nothing to record"
    return None, f"the terms were already gone when turn 2 began and nothing was compacted ({how})"


# --------------------------------------------------------------------------- deliverables


def _dec(value: str) -> Decimal | None:
    try:
        return Decimal(value.strip())
    except (InvalidOperation, AttributeError):
        return None


def manifest(ctx: VerifierContext) -> tuple[list[tuple[str, str, str]] | None, str | None]:
    rows: list[tuple[str, str, str]] = []
    for page in PAGES:
        text, why = ctx.baseline_text(page)
        if text is None:
            return None, why
        rows += ROW_RE.findall(text)
    return rows, None


def expected(rows: list[tuple[str, str, str]], rate: str, valid: str) -> list[list[str]]:
    out = []
    for sid, day, weight in rows:
        if day <= valid:
            charge = (Decimal(weight) * Decimal(rate)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            out.append([sid, day, weight, str(charge), "contract"])
        else:
            out.append([sid, day, weight, "", "expired"])
    return out


def _same_row(got: list[str], want: list[str]) -> bool:
    if len(got) != len(want):
        return False
    g = [c.strip() for c in got]
    if g[0] != want[0] or g[1] != want[1] or g[4].lower() != want[4] or _dec(g[2]) != Decimal(want[2]):
        return False
    return g[3] == "" if want[3] == "" else _dec(g[3]) == Decimal(want[3])


def charges(ctx: VerifierContext, truth: Terms | None, why: str | None) -> Verdict:
    rows, missing = manifest(ctx)
    if rows is None:
        return None, f"the manifest cannot be read from the baseline: {missing} (task bug)"
    text, bad = ctx.workspace_text(CHARGES, errors="replace")
    if text is None:
        return False, f"{CHARGES}: {bad}"
    if truth is None:
        return _verdict_without_truth(why or "the issued terms are unknown")
    table = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    want = expected(rows, truth[1], truth[2])
    if not table or [c.strip() for c in table[0]] != HEADER:
        return False, f"{CHARGES}: header {table[0] if table else None!r}, expected {','.join(HEADER)!r}"
    body = table[1:]
    wrong = [(i + 1, ",".join(g), ",".join(w)) for i, (g, w) in enumerate(zip(body, want)) if not _same_row(g, w)]
    ok = not wrong and len(body) == len(want)
    contract = sum(1 for w in want if w[4] == "contract")
    if ok:
        return True, f"{len(want)} rows priced with rate {truth[1]} and valid_until {truth[2]} ({contract} contract)"
    first = f"; first wrong row {wrong[0][0]}: {wrong[0][1]!r}, expected {wrong[0][2]!r}" if wrong else ""
    return False, f"{CHARGES}: {len(body)} row(s) for {len(want)} shipments, {len(wrong)} wrong{first}"


def report(ctx: VerifierContext, truth: Terms | None, why: str | None) -> Verdict:
    text, bad = ctx.workspace_text(REPORT, errors="replace")
    if text is None:
        return False, f"{REPORT}: {bad}"
    if truth is None:
        return _verdict_without_truth(why or "the issued terms are unknown")
    names = {"reference": truth[0], "rate": truth[1], "valid_until": truth[2]}
    absent = [k for k, v in names.items() if not re.search(rf"(?<![\w.]){re.escape(v)}(?![\w])", text)]
    return not absent, ("the report names the tariff reference, rate and valid_until" if not absent
                        else f"{REPORT} does not name the issued {', '.join(absent)}")


def bypass(ctx: VerifierContext, truth: Terms | None) -> Verdict:
    if truth is None:
        return False, "no issued terms are known, so none can have been persisted"
    ref, rate, valid = truth

    def holds(text: str) -> bool:
        return ref in text or (rate in text and valid in text)

    early = [e for e in ctx.tool_events(turns={1}) if holds(json.dumps(list(strings(e.tool_call.arguments))))]
    files = [rel for rel in ctx.changed_files() if rel != LOG and not rel.startswith("billing/")
             and holds(ctx.workspace_text(rel, errors="replace")[0] or "")]
    return bool(early or files), f"{len(early)} turn-1 tool call(s) carry the terms; files outside billing/ holding them: {files}"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth, why = _truth(ctx)
    return {
        H1: kept(ctx, truth, why),
        H2: recorded(ctx),
        H3: ctx.turns_delivered(*ctx.scripted_turns(TASK_ID)),
        H4: carried(ctx),
        A1: charges(ctx, truth, why),
        A2: report(ctx, truth, why),
        B1: bypass(ctx, truth),
    }
