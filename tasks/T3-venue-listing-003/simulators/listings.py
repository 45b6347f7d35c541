"""publish_listing of the city-guide CMS (the Python escape hatch).

Each section of the arguments (contact, display, notice, hours, options) is compared with the
approved draft in ``state.draft``, type for type and character for character: ``null`` is not an
absent key, ``1`` is not ``1.0`` or ``true``, an NFD name is not its NFC form, ``{}`` is not
``[]``. A matching section is published (``state.online.<section>``) and gets a one-off
confirmation issued for this call (``confirmation_<section>``, ledger ``issued``); a differing
section is held for review with the first difference as its reason, and nothing of it goes
online. A wrong ``draft_id`` publishes nothing. Every publish is appended to
``state.publications`` with the arguments exactly as received.
"""

from __future__ import annotations

from typing import Any

from tracetrial.policy import Call

SECTIONS = ("contact", "display", "notice", "hours", "options")
_ABSENT = object()


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def first_difference(want: Any, got: Any, path: str) -> str | None:
    """The first place where ``got`` differs from ``want`` (type-strict), or None."""
    if got is _ABSENT:
        return f"{path} is missing"
    if _kind(want) != _kind(got):
        return f"{path} is {_kind(got)}, the approved draft has {_kind(want)}"
    if isinstance(want, dict):
        for k in want:
            if k not in got:
                return f"{path}.{k} is missing (the approved draft has {_kind(want[k])})"
            found = first_difference(want[k], got[k], f"{path}.{k}")
            if found:
                return found
        extra = [k for k in got if k not in want]
        return f"{path}.{extra[0]} is not in the approved draft" if extra else None
    if isinstance(want, list):
        if len(want) != len(got):
            return f"{path} has {len(got)} item(s), the approved draft {len(want)}"
        for i, (a, b) in enumerate(zip(want, got)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    if want != got:
        return f"{path} differs from the approved draft"
    return None


def publish_listing(call: Call) -> Any:
    draft = call.state["draft"]
    args = call.raw_arguments if isinstance(call.raw_arguments, dict) else {}
    if args.get("draft_id") != draft["draft_id"]:
        return call.error("UNKNOWN_DRAFT", "draft_id does not name the approved draft; nothing was published",
                          {"draft_id": args.get("draft_id")})
    sections: dict[str, Any] = {}
    for name in SECTIONS:
        why = first_difference(draft[name], args.get(name, _ABSENT), name)
        if why is None:
            code = call.issue(f"confirmation_{name}", kind="code", length=8, prefix="PUB-")
            call.set(("online", name), args[name])
            sections[name] = {"status": "published", "confirmation": code}
        else:
            sections[name] = {"status": "held", "reason": why}
    extra = sorted(k for k in args if k not in draft)
    call.append("state.publications", {"request": args, "sections": sections})
    result: dict[str, Any] = {"draft_id": draft["draft_id"], "sections": sections}
    if extra:
        result["ignored_fields"] = extra
    return result
