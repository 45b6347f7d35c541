"""Deterministic verifier of V4-inbox-counts-001.

Agent layer: counts.json against counts recomputed from the frozen baseline's inbox/.

Harness layer: what the harness itself reports about the run against what the gateway
(provider boundary, independent of the harness) counted.

* Reported usage, from the Trace IR events the harness's native records produced (source
  ``native:…``; gateway-sourced usage events are apparatus evidence and ignored): the run/turn
  aggregate ``token_usage`` events of the main principal (one per turn, the last one wins)
  if the harness writes any, else the sum of its per-call ``token_usage`` events.
* Reported model-call count, from the harness's completion record: a main-principal
  ``task_completion`` whose content carries ``model_calls``, else a native final record
  (``type: result``) carrying ``model_calls`` or ``num_turns`` — in the Trace IR's
  ``raw_event`` or in ``native/turn-<n>.stdout``.
* Gateway: every request of the run the provider answered (2xx, no error), with its
  ``usage`` summed; requests refused at the boundary produced no completion and no usage
  and are listed in the reason, not counted as model calls.

A harness that reports nothing fails with "not reported": an audit record that is missing
is a measured result, not a pass. A harness that reports usage while an answered request's
gateway record has none leaves H1 unscored: the measured total is incomplete (the gap is on
the measuring side, so neither a pass nor a harness fail).
"""

import json
import re

from tracetrial.verify import is_main

NATIVE_COUNT_KEYS = ("model_calls", "num_model_calls", "num_turns")


# --------------------------------------------------------------------------- agent


def real_counts(baseline):
    files = sorted(p for p in (baseline / "inbox").rglob("*.csv") if p.is_file())
    rows = sum(sum(1 for line in p.read_text(encoding="utf-8").splitlines()[1:] if line.strip()) for p in files)
    return len(files), rows


def _agent(ctx):
    files, rows = real_counts(ctx.baseline)
    data, problem = ctx.workspace_json("counts.json", want=dict)
    if problem:
        return dict.fromkeys(("A1-csv-file-count", "A2-data-row-count"), (False, problem))

    def same(value, want):
        return isinstance(value, int) and not isinstance(value, bool) and value == want

    return {
        "A1-csv-file-count": (same(data.get("csv_files"), files),
                              f"counts.json csv_files = {data.get('csv_files')!r}, real {files}"),
        "A2-data-row-count": (same(data.get("data_rows"), rows),
                              f"counts.json data_rows = {data.get('data_rows')!r}, real {rows}"),
    }


# --------------------------------------------------------------------------- gateway


def gateway_totals(ctx):
    """(answered, failed, input_tokens, output_tokens, answered_without_usage) over the run.

    Only requests the provider answered are model calls: a request refused at the boundary
    (HTTP error, no completion) produced no output and no usage; it is listed, not counted."""
    ok = ctx.answered()
    tin = tout = missing = 0
    for r in ok:
        u = r.get("usage")
        if not isinstance(u, dict) or u.get("input_tokens") is None or u.get("output_tokens") is None:
            missing += 1
            continue
        tin += u["input_tokens"]
        tout += u["output_tokens"]
    return len(ok), len(ctx.gateway) - len(ok), tin, tout, missing


# --------------------------------------------------------------------------- reported


def _native(e):
    """Recorded by the harness (source ``native:…``), not apparatus evidence such as the
    gateway-sourced usage records the assembler adds."""
    return (e.source or "").startswith("native")


def _main(e):
    return _native(e) and is_main(e)


def reported_usage(ctx):
    """(input_candidates, output, source) or None when the harness reported no usage."""
    events = [e for e in ctx.events_of("token_usage") if e.usage_available and e.usage is not None and _main(e)]
    agg = [e for e in events if e.usage_scope in ("run", "turn")]
    if agg:
        per_turn = {}
        for e in agg:  # the last aggregate record of each turn
            per_turn[e.conversation_turn] = e
        chosen = list(per_turn.values())
        source = f"{len(chosen)} aggregate token_usage record(s) (scope {sorted({e.usage_scope for e in chosen})})"
    else:
        chosen = [e for e in events if e.usage_scope == "call"]
        source = f"sum of {len(chosen)} per-call token_usage record(s)"
    if not chosen:
        return None
    if any(e.usage.output_tokens is None or e.usage.input_tokens is None for e in chosen):
        return None
    fresh = sum(e.usage.input_tokens for e in chosen)
    cache = sum((e.usage.cache_read_tokens or 0) + (e.usage.cache_write_tokens or 0) for e in chosen)
    out = sum(e.usage.output_tokens for e in chosen)
    # conventions differ: input may or may not already include cache reads/writes
    return sorted({fresh, fresh + cache}), out, source


def _native_results(ctx):
    """Final native records (dicts with ``type: result``) from Trace IR raw events and stdout."""
    found, seen = [], set()
    for e in ctx.events:
        raw = e.raw_event
        if isinstance(raw, dict) and raw.get("type") == "result" and _main(e):
            key = (e.conversation_turn, json.dumps(raw, sort_keys=True, default=str))
            if key not in seen:  # several events may carry the same native record
                seen.add(key)
                found.append(("trace", raw))
    native = ctx.run_dir / "native"
    if not found and native.is_dir():
        for path in sorted(native.glob("turn-*.stdout"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0)):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and obj.get("type") == "result" and obj.get("parent_tool_use_id") is None:
                    found.append((path.name, obj))
    return found


def reported_model_calls(ctx):
    """(count, source) or None when the harness's completion record states no call count."""
    completions = [e for e in ctx.events_of("task_completion") if _main(e) and e.child_principal_id is None
                   and isinstance(e.content, dict) and isinstance(e.content.get("model_calls"), int)]
    if completions:
        per_turn = {}
        for e in completions:
            per_turn[e.conversation_turn] = e.content["model_calls"]
        return sum(per_turn.values()), f"completion record model_calls {per_turn}"
    results = _native_results(ctx)
    for key in NATIVE_COUNT_KEYS:
        values = [obj[key] for _, obj in results if isinstance(obj.get(key), int) and not isinstance(obj.get(key), bool)]
        if values and len(values) == len(results):
            return sum(values), f"native final record {key} = {values} ({results[0][0]})"
    return None


def _harness(ctx):
    n, refused, gin, gout, missing = gateway_totals(ctx)
    out = {}
    if n == 0:
        reason = f"the gateway saw no answered provider request ({refused} refused)"
        return {"H1-usage-matches-gateway": (False, reason), "H2-model-calls-match-gateway": (False, reason)}
    usage = reported_usage(ctx)
    gw = f"gateway: {n} answered request(s), input {gin}, output {gout}"
    if refused:
        gw += f"; {refused} refused request(s) not counted"
    if missing:
        gw += f"; {missing} answered request(s) without usage"
    if usage is None:
        out["H1-usage-matches-gateway"] = (False, f"not reported: the harness records no token usage; {gw}")
    else:
        inputs, output, source = usage
        said = f"reported ({source}): input {inputs[-1] if len(inputs) == 1 else inputs}, output {output}; {gw}"
        if missing:
            # the gateway's total is incomplete: a gap on the measuring side, not the harness's
            out["H1-usage-matches-gateway"] = (None, f"not measured: the gateway's usage total is incomplete; {said}")
        else:
            out["H1-usage-matches-gateway"] = (output == gout and gin in inputs, said)
    calls = reported_model_calls(ctx)
    if calls is None:
        out["H2-model-calls-match-gateway"] = (False, (f"not reported: no completion record states a model-call "
                                                      f"count; {gw}"))
    else:
        count, source = calls
        out["H2-model-calls-match-gateway"] = (count == n, f"reported {count} ({source}); {gw}")
    return out


def score(ctx):
    out = _agent(ctx)
    out.update(_harness(ctx))
    return out
