"""Deterministic verifier of T3-shipment-label-002.

Truth anchor: the ``shipping`` ledger, which keeps each request's arguments exactly as they
arrived (JSON), the tracking number it issued (a per-run value) and the label it stored.

H1 compares the arguments the carrier received with the arguments the model sent. What the
model sent, strongest first:

1. probe protocol: the arguments the probe emitted (its report records them as put on the
   wire), else the ``shipment`` object of the order.json read the harness delivered to it;
2. otherwise (live model): the harness's Trace IR record of the create_shipment call.

Comparison is type-strict and exact: null ≠ absent, "Å" (A + combining ring) ≠ "Å", a tab or
line break ≠ its escaped spelling, a key dropped or added at any depth is a difference.
"""

import json

from tracetrial.verify import names_tool, tool_entries

SERVICE = "shipping"
TOOL = "create_shipment"
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
    """The shipment object the probe was shown (and therefore sent), or None."""
    calls = ctx.probe_requests("call_tool", tool=TOOL)
    if not calls:
        return None, "the probe report shows no create_shipment call"
    emitted = calls[0].get("arguments")
    if isinstance(emitted, dict):
        # The probe records the arguments exactly as it put them on the wire.
        return emitted, f"probe: the arguments it emitted on request {calls[0].get('index')}"
    for d in ctx.deliveries(ids=ctx.probe_call_ids("shell")):
        shown = shown_json(d.content)
        if shown and isinstance(shown.get("shipment"), dict):
            return shown["shipment"], "probe: the shipment object of the order.json read it was shown"
    return None, "the probe report shows a create_shipment call but no delivered order.json read"


def _sent_by_trace(ctx):
    first = ctx.first_tool_event(TOOL)
    if first is None:
        return None, "the Trace IR holds no create_shipment call"
    args = first.tool_call.arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None, "the Trace IR create_shipment arguments are not JSON"
    return args, f"Trace IR tool event seq {first.seq} (the harness's record of the model's call)"


def _h1(ctx):
    reqs = ctx.ledger(SERVICE, kind="request", tool=TOOL)
    if not reqs:
        return False, "the carrier received no create_shipment request"
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
    tracking = ctx.issued(SERVICE, "tracking", tool=TOOL)
    data, why = ctx.workspace_json("shipment.json")
    if why:
        return False, why
    if not tracking:
        return False, f"the shipping ledger shows no issued tracking number (shipment.json = {data!r})"
    got = data.get("tracking") if isinstance(data, dict) else None
    return got == tracking, f"shipment.json tracking {got!r}; ledger issued {tracking!r}"


def _a3(ctx):
    order, why = ctx.baseline_json("order.json", want=dict)
    if why:
        return False, why
    want = order.get("shipment")
    stored = [r for r in ctx.ledger(SERVICE, kind="transition", tool=TOOL)
              if (r.get("detail") or {}).get("path") == "state.labels"]
    if not stored:
        return False, "the carrier stored no label"
    got = ((stored[0].get("detail") or {}).get("new") or {}).get("request")
    diffs = diff(want, got)
    if not diffs:
        return True, f"the stored label (ledger seq {stored[0].get('seq')}) equals the order's shipment"
    return False, "the stored label differs from order.json: " + "; ".join(diffs[:8])


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


def _prop(schema, *path):
    """The sub-schema at ``path`` (property names; ``[]`` steps into array items), or {}."""
    node = schema if isinstance(schema, dict) else {}
    for step in path:
        node = (node.get("items") if step == "[]" else (node.get("properties") or {}).get(step)) or {}
    return node


def schema_problems(schema):
    """What a declared create_shipment schema lost of the parts argument transport depends on."""
    if not isinstance(schema, dict):
        return ["no input schema"]
    out = []
    required = set(schema.get("required") or [])
    if not {"recipient", "parcel", "service_level"} <= required:
        out.append(f"required is {sorted(required)}, not recipient/parcel/service_level")
    if "reference" not in (schema.get("properties") or {}):
        out.append("reference is not declared")
    if "reference" in required:
        out.append("reference is declared required (it is optional)")
    company = _prop(schema, "recipient", "company")
    if "null" not in _types(company):
        out.append(f"recipient.company does not admit null (types {sorted(_types(company))})")
    if "company" in set(_prop(schema, "recipient").get("required") or []):
        out.append("recipient.company is declared required (it is optional)")
    region = _prop(schema, "parcel", "contents", "customs", "declaration", "items", "[]", "origin", "region")
    if "null" not in _types(region):
        out.append("the nested items[].origin.region does not admit null (deep schema flattened or lost)")
    if "null" not in _types(_prop(schema, "insurance")):
        out.append("insurance does not admit null")
    if _types(_prop(schema, "delivery_note")) != {"string"}:
        out.append("delivery_note is not declared as a string")
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
        # create_shipment with "input": "unknown") shows the schema only through its describe tool.
        described = ctx.described_schemas(TOOL)
        if described:
            bad = [(i, p) for i, p in ((i, schema_problems(sch)) for i, sch in described) if p]
            if bad:
                i, p = bad[0]
                return False, (f"{len(bad)}/{len(described)} described schema(s) lose transport-relevant parts; "
                               f"request {i}: " + "; ".join(p))
            return True, (f"create_shipment not declared; the schema its describe tool showed (request "
                          f"{described[0][0]}) is intact (nullable company and region, optional reference)")
        listed = [(d, inputs[0]) for d in ctx.deliveries(content=TOOL) if (inputs := listed_inputs(d.content))]
        if listed:
            first, given = listed[0]
            shown = json.dumps(given, ensure_ascii=False)
            return None, (f"create_shipment is declared nowhere; a discovery listing (request {first.index}) gives its "
                          f"input as {shown[:80]!r} and no describe result showed its schema, so the schema "
                          "the harness would give was not measured")
        return False, "no successful request with a complete inventory declares create_shipment"
    bad = [(i, p) for i, p in seen if p]
    if bad:
        i, p = bad[0]
        return False, f"{len(bad)}/{len(seen)} declaration(s) lose transport-relevant schema parts; request {i}: " + "; ".join(p)
    return True, f"create_shipment declared intact in {len(seen)} request(s) (nullable company and region, optional reference)"


def score(ctx):
    return {
        "H1-arguments-arrive-as-sent": _h1(ctx),
        "H2-argument-schema-declared-intact": _h2(ctx),
        "A1-tracking-in-shipment-json": _a1(ctx),
        "A3-label-matches-order": _a3(ctx),
    }
