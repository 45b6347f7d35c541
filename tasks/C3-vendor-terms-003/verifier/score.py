"""Deterministic verifier of C3-vendor-terms-003.

Truth anchor: ``.terms/lookups.jsonl``, the terms desk's own audit log. ``lookup_terms.py``
draws the contract reference per run and records only sha256("contract|<ref>") for a served
lookup, so a ``CTR-`` value anywhere is this run's reference exactly when its digest is one of
those commitments (unguessable; the decoy in order_lines.txt never matches).

* H1 — the turn-3 model input still holds the lookup's reference. Evidence, strongest first:
  archived request bodies of the turn-3 requests (``--tt-record-bodies``); the probe report (the
  probe reads the same request bodies and its turn-3 final answer states the reference it found
  there, or that it found none); the harness's own turn-3 ``model_input`` records. No evidence at
  all is unscored, never a pass.
* H2 — turn delivery (rule 11), from the archived pack snapshot.
* A1/A2 — po.md ends with the one ``Contract-Ref: <committed ref>`` line, after the heading and
  one bullet per ``line:`` entry of order_lines.txt (frozen baseline).
* A3 — the lookup ran exactly once (audit log; lookup commands in the Trace IR as a floor, so a
  deleted log cannot hide a second lookup).
* B-H1 — bypass: the reference was written into a tool call or a workspace file before turn 3.
"""

import hashlib
import json
import re

TASK_ID = "C3-vendor-terms-003"
LOG = ".terms/lookups.jsonl"
HEADING = "# Purchase order: northwind-freight"
TURN3_MARK = "Finally, append one last line to `po.md`"
REF_RE = re.compile(r"CTR-[A-Z0-9]{8}")
LINE_RE = re.compile(r"(?m)^line:\s*([^|\n]+?)\s*\|\s*(\d+)\s*\|\s*(.+?)\s*$")
ANSWER = "Turn-1 contract reference:"


def _commitments(ctx):
    """(served commitments, all lookup records) or (None, reason) when the audit log is unreadable."""
    recs, why = ctx.workspace_jsonl(LOG, missing_ok=True)
    if recs is None:
        return None, why
    return {r["ref_sha256"] for r in recs if r.get("served") and isinstance(r.get("ref_sha256"), str)}, recs


def _valid(text, commits):
    """This run's references in ``text`` (those whose digest the desk committed), in order."""
    return [m for m in REF_RE.findall(text or "")
            if hashlib.sha256(f"contract|{m}".encode()).hexdigest() in commits]


def _lookup_calls(ctx):
    return [e for e in ctx.tool_events(command="lookup_terms", main=True)]


def _agent(ctx, commits, recs):
    text, why = ctx.workspace_text("po.md")
    src, missing = ctx.baseline_text("order_lines.txt")
    out = {}
    if text is None or src is None:
        out["A1-contract-ref-line"] = out["A2-order-lines"] = (False, why or missing)
    else:
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        last = lines[-1] if lines else None
        refs = [line for line in lines if line.startswith("Contract-Ref:")]
        if commits is None:
            out["A1-contract-ref-line"] = (None, f"the terms desk's audit log is unreadable: {recs}")
        elif not commits:
            out["A1-contract-ref-line"] = (False, f"no lookup was served, so no reference exists (last line {last!r})")
        else:
            ok = (last is not None and last.startswith("Contract-Ref: ") and _valid(last, commits) == [last[14:]]
                  and len(refs) == 1)
            note = (f"last line {last!r}; {len(refs)} Contract-Ref line(s); expected "
                    "'Contract-Ref: <the reference the lookup committed>' once")
            out["A1-contract-ref-line"] = (ok, note)
        want = [f"- {sku} x{qty}: {desc}" for sku, qty, desc in LINE_RE.findall(src)]
        got = [line for line in lines if line.startswith("- ")]
        out["A2-order-lines"] = (bool(lines) and lines[0] == HEADING and got == want,
                                 f"first line {lines[0] if lines else None!r}; bullets {got} (expected {want})")
    calls = len(_lookup_calls(ctx))
    if commits is None:
        out["A3-single-lookup"] = (None, f"the terms desk's audit log is unreadable: {recs}")
    else:
        n = max(len(recs), calls)
        out["A3-single-lookup"] = (n == 1, f"{len(recs)} lookup(s) in {LOG}; {calls} lookup command(s) in the trace")
    return out


def _from_bodies(ctx, commits, reqs):
    bodies = {r.get("index"): ctx.request_body(r.get("index")) for r in reqs}
    if not bodies or None in bodies.values():
        return None
    hits = [i for i, body in bodies.items() if _valid(body, commits)]
    return len(hits) == len(bodies), (f"request bodies (provider boundary): the reference is in {len(hits)}/"
                                      f"{len(bodies)} turn-3 requests {list(bodies)}")


def _from_probe(ctx, commits):
    if ctx.probe is None:
        return None
    turn3 = ctx.probe_requests(turn=3, kind="main")
    if not turn3:
        return False, "probe report: no turn-3 request reached the probe model"
    final = ctx.final_text or ""
    if ANSWER not in final:
        return False, f"probe report: turn 3 did not end with the probe's answer (final text {final[:120]!r})"
    ok = bool(_valid(final.split(ANSWER, 1)[1], commits))
    return ok, (f"probe report ({len(turn3)} turn-3 request(s)): the probe model "
                + ("found the lookup's reference in its turn-3 input" if ok else f"did not find it: {final[:160]!r}"))


def _from_trace(ctx, commits):
    inputs = ctx.events_of("model_input", turns={3}, main=True)
    if not inputs:
        return None
    hits = [bool(_valid(json.dumps(e.messages, ensure_ascii=False), commits)) for e in inputs]
    return all(hits), f"Trace IR model_input (harness record): the reference is in {sum(hits)}/{len(hits)} turn-3 inputs"


def _fact_in_turn3(ctx, commits, recs):
    if commits is None:
        return None, f"the terms desk's audit log is unreadable: {recs}"
    if not commits:
        return False, "no lookup was served in turn 1, so no reference could be carried"
    start = next((i for i, r in enumerate(ctx.gateway) if TURN3_MARK in (r.get("last_user_text") or "")), None)
    if start is None:
        return False, "no gateway request carries the turn-3 user message"
    reqs = [r for r in ctx.gateway[start:] if r.get("tools")]
    verdict = _from_bodies(ctx, commits, reqs) or _from_probe(ctx, commits) or _from_trace(ctx, commits)
    return verdict or (None, "no evidence of the turn-3 model input (no bodies, probe report or model_input events)")


def _bypass(ctx, commits):
    """The reference was written somewhere before turn 3 (then a file, not the context, could carry it)."""
    if not commits:
        return False, "no reference was issued"
    early = [e for e in ctx.tool_events(turns={1, 2}) if _valid(json.dumps(e.tool_call.arguments, default=str), commits)]
    files = [rel for rel in ctx.changed_files() if rel not in ("po.md", LOG)
             and _valid(ctx.workspace_text(rel, errors="replace")[0], commits)]
    return bool(early or files), f"{len(early)} turn-1/2 tool call(s) carry the reference; files holding it: {files}"


def score(ctx):
    commits, recs = _commitments(ctx)
    return {**_agent(ctx, commits, recs),
            "H1-fact-in-turn3-input": _fact_in_turn3(ctx, commits, recs),
            "H2-user-turns-delivered": ctx.turns_delivered(*ctx.scripted_turns(TASK_ID)),
            "B-H1-ref-persisted-early": _bypass(ctx, commits or set())}
