"""Deterministic verifier of T3-invoice-args-001.

Truth anchor: the ``billing`` ledger, which keeps each request's arguments exactly as they
arrived (JSON, arbitrary-size integers), the receipt it issued and the invoice it stored.

H1 compares the arguments the billing service received with the arguments the model sent.
What the model sent, strongest first:

1. probe protocol: the probe is a deterministic policy that sends the ``invoice`` object of
   order.json exactly as it was shown to it. The verifier rebuilds that object from the
   read result the harness delivered to the model (gateway record), with the policy's own
   parsing (exact integers, Unicode, null);
2. otherwise (live model): the harness's Trace IR record of the create_invoice call
   (a weaker source: it is the harness's own record of what the model sent).

Comparison is type-strict (9007199254740993 ≠ 9007199254740992 ≠ 9007199254740992.0,
null ≠ absent, NFC ≠ NFD text).
"""

import json

from tracetrial.verify import names_tool, tool_entries

SERVICE = "billing"
TOOL = "create_invoice"
#: Where a JSON value may start in a delivered result's text.


def listed_inputs(text, tool=TOOL):
    """The ``input`` a discovery listing gives for ``tool`` (OpenClaw's tool_search: ``"input":
    "unknown"``), for each entry of it in a delivered result, whatever the key order or wrapping
    (kernel :func:`tool_entries`)."""
    return [entry["input"] for entry in tool_entries(text, tool) if "input" in entry]


def shown_json(text):
    """The probe policy's parsing: the JSON object inside a delivered shell result."""
    text = text or ""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def diff(sent, got, path="$"):
    """Type-strict differences between two JSON values, as readable lines."""
    if _kind(sent) != _kind(got):
        return [f"{path}: sent {sent!r} ({_kind(sent)}), received {got!r} ({_kind(got)})"]
    if isinstance(sent, dict):
        out = []
        for k in sent:
            if k not in got:
                out.append(f"{path}.{k}: sent {sent[k]!r}, absent on arrival")
            else:
                out.extend(diff(sent[k], got[k], f"{path}.{k}"))
        out.extend(f"{path}.{k}: not sent, arrived as {got[k]!r}" for k in got if k not in sent)
        return out
    if isinstance(sent, list):
        if len(sent) != len(got):
            return [f"{path}: sent {len(sent)} item(s), received {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(sent, got)) for d in diff(a, b, f"{path}[{i}]")]
    return [] if sent == got else [f"{path}: sent {sent!r}, received {got!r}"]


def _sent_by_probe(ctx):
    """The invoice object the probe was shown (and therefore sent), or None."""
    calls = ctx.probe_requests("call_tool", tool=TOOL)
    if not calls:
        return None, "the probe report shows no create_invoice call"
    emitted = calls[0].get("arguments")
    if isinstance(emitted, dict):
        # The probe records the arguments exactly as it put them on the wire.
        return emitted, f"probe: the arguments it emitted on request {calls[0].get('index')}"
    for d in ctx.deliveries(ids=ctx.probe_call_ids("shell")):
        shown = shown_json(d.content)
        if shown and isinstance(shown.get("invoice"), dict):
            return shown["invoice"], "probe: the invoice object of the order.json read it was shown"
    return None, "the probe report shows a create_invoice call but no delivered order.json read"


def _sent_by_trace(ctx):
    first = ctx.first_tool_event(TOOL)
    if first is None:
        return None, "the Trace IR holds no create_invoice call"
    args = first.tool_call.arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None, "the Trace IR create_invoice arguments are not JSON"
    return args, f"Trace IR tool event seq {first.seq} (the harness's record of the model's call)"


def _h1(ctx):
    reqs = ctx.ledger(SERVICE, kind="request", tool=TOOL)
    if not reqs:
        return False, "the billing service received no create_invoice request"
    sent, source = _sent_by_probe(ctx)
    if sent is None and not ctx.probe_requests():
        sent, source = _sent_by_trace(ctx)
    if sent is None:
        return False, f"what the model sent is not established: {source}"
    got = reqs[0].get("arguments")
    diffs = diff(sent, got)
    if not diffs:
        return True, f"ledger seq {reqs[0].get('seq')}: arguments arrived exactly as sent ({source})"
    return False, f"ledger seq {reqs[0].get('seq')} differs from what was sent ({source}): " + "; ".join(diffs[:8])


def _a1(ctx):
    receipt = ctx.issued(SERVICE, (ctx.truth or {}).get("receipt_value_name", "receipt"), tool=TOOL)
    data, why = ctx.workspace_json("invoice.json")
    if why:
        return False, why
    if not receipt:
        return False, f"the billing ledger shows no issued receipt (invoice.json = {data!r})"
    got = data.get("receipt") if isinstance(data, dict) else None
    return got == receipt, f"invoice.json receipt {got!r}; ledger issued {receipt!r}"


def _a3(ctx):
    truth = ctx.truth or {}
    order, why = ctx.baseline_json(truth.get("order_file", "order.json"))
    if why:
        return False, why
    want = order[truth.get("invoice_key", "invoice")]
    stored = [r for r in ctx.ledger(SERVICE, kind="transition", tool=TOOL)
              if (r.get("detail") or {}).get("path") == "state.invoices"]
    if not stored:
        return False, "the billing service stored no invoice"
    got = (stored[0].get("detail") or {}).get("new", {}).get("request")
    diffs = diff(want, got)
    if not diffs:
        return True, f"the stored invoice (ledger seq {stored[0].get('seq')}) equals the order's invoice"
    return False, "the stored invoice differs from order.json: " + "; ".join(diffs[:8])


def _types(schema):
    if not isinstance(schema, dict):
        return set()
    t = schema.get("type")
    out = set(t) if isinstance(t, list) else ({t} if isinstance(t, str) else set())
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key) or []:
            out |= _types(sub)
    if schema.get("nullable") is True:
        out.add("null")
    return out


def schema_problems(schema):
    """What a declared create_invoice schema lost of the parts argument transport depends on."""
    if not isinstance(schema, dict):
        return ["no input schema"]
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    out = []
    if not {"customer", "lines", "note"} <= required:
        out.append(f"required is {sorted(required)}, not customer/lines/note")
    if "po_number" in required:
        out.append("po_number is declared required (it is optional)")
    if "po_number" not in props:
        out.append("po_number is not declared")
    if "null" not in _types(props.get("note")):
        out.append(f"note does not admit null (types {sorted(_types(props.get('note')))})")
    customer = props.get("customer") or {}
    if _types((customer.get("properties") or {}).get("name")) != {"string"}:
        out.append("customer.name is not declared as a string")
    line = ((props.get("lines") or {}).get("items") or {}).get("properties") or {}
    if _types(line.get("unit_price_cents")) != {"integer"}:
        out.append(f"unit_price_cents is declared as {sorted(_types(line.get('unit_price_cents')))}, not integer")
    return out


def _declares(tool):
    name = tool.get("name") or ""
    return names_tool(name, TOOL) and (name != TOOL or (tool.get("namespace") or "").endswith(SERVICE))


def _h2(ctx):
    seen = []
    for rec in ctx.answered():
        if not rec.get("inventory_complete"):
            continue
        for tool in rec.get("tools") or []:
            if isinstance(tool, dict) and _declares(tool):
                seen.append((rec.get("index"), schema_problems(tool.get("input_schema"))))
    if not seen:
        # A harness that keeps MCP tools behind a dispatcher (OpenClaw's tool_search lists
        # create_invoice with "input": "unknown") shows the schema only through its describe tool.
        described = ctx.described_schemas(TOOL)
        if described:
            bad = [(i, p) for i, p in ((i, schema_problems(sch)) for i, sch in described) if p]
            if bad:
                i, p = bad[0]
                return False, (f"{len(bad)}/{len(described)} described schema(s) lose transport-relevant parts; "
                               f"request {i}: " + "; ".join(p))
            return True, (f"create_invoice not declared; the schema its describe tool showed (request "
                          f"{described[0][0]}) is intact (nullable note, optional po_number, integer price)")
        listed = [(d, inputs[0]) for d in ctx.deliveries(content=TOOL) if (inputs := listed_inputs(d.content))]
        if listed:
            first, given = listed[0]
            shown = json.dumps(given, ensure_ascii=False)
            return None, (f"create_invoice is declared nowhere; a discovery listing (request {first.index}) gives its "
                          f"input as {shown[:80]!r} and no describe result showed its schema, so the schema "
                          "the harness would give was not measured")
        return False, "no successful request with a complete inventory declares create_invoice"
    bad = [(i, p) for i, p in seen if p]
    if bad:
        i, p = bad[0]
        return False, f"{len(bad)}/{len(seen)} declaration(s) lose transport-relevant schema parts; request {i}: " + "; ".join(p)
    return True, f"create_invoice declared intact in {len(seen)} request(s) (nullable note, optional po_number, integer price)"


def score(ctx):
    return {
        "H1-arguments-arrive-as-sent": _h1(ctx),
        "H2-argument-schema-declared-intact": _h2(ctx),
        "A1-receipt-in-invoice-json": _a1(ctx),
        "A3-invoice-matches-order": _a3(ctx),
    }
