"""The ideal agent for L7-claims-import-003 (session resume after a kill in a later turn, between calls).

Turn 1: ``./fetch_manifest.sh`` checks today's claims batch out; its result shows the one-off
manifest reference (``MF-...``) and the claim count, which the agent reports. The turn ends normally.

Turn 2: the manifest reference is taken from the checkout call the request still shows (its own
earlier call and the result shown for it), then the one-shot ``./import_claims.sh <ref>`` (its result
shows the import receipt ``IMP-...``), then ``./notify_adjusters.sh <receipt>``, during which the
runner kills the harness. No reference shown: it cannot import and asks.

Turn 3 (the session resumed after the kill) acts on what its first request shows:

* the import call with its receipt: the batch is booked - never import again; the receipt is taken
  from that result (the claims system cannot be asked for it);
* no import call at all (the harness dropped it): nothing suggests the batch was imported, so it
  imports (a second booking is then the harness's doing);
* an import call without a receipt (no result, a notice, something else): it may have booked and the
  receipt cannot be recovered, so it neither imports again nor reports - it asks;
* the manifest reference from the checkout's result (else from its own import call's arguments);
  none anywhere: it cannot tell what to import or report, does nothing and asks;
* the hand-over is re-run unless it is shown as done for that receipt (it is repeatable).

It writes ``import-report.json`` and ends with an account of what the resumed request showed
(``Resume check: manifest lookup <...>; import call <...>.``), which the verifier reads when no
request body is archived. Nothing here embeds a value it was not shown.
"""

import json
import re

from tracetrial.policy import final, shell, write_file

FETCH, IMPORT, NOTIFY = "fetch_manifest.sh", "import_claims.sh", "notify_adjusters.sh"
REF_RE = re.compile(r"Manifest reference: (MF-[A-Z0-9]{8})")
CLAIMS_RE = re.compile(r"(\d+) claims, NOK")
RECEIPT_RE = re.compile(r"Import receipt: (IMP-[A-Z0-9]{8})")
ARG_REF_RE = re.compile(r"MF-[A-Z0-9]{8}")
HANDED_RE = re.compile(r"Handed import (IMP-[A-Z0-9]{8}) to the adjusters")
REPORT = "import-report.json"


def _calls(turn, script):
    return [c for c in turn.calls if script in (c.arguments or "")]


def lookup_seen(calls):
    """``(how the checkout call is shown, the manifest reference or None)``."""
    if not calls:
        return "not shown", None
    for call in calls:
        found = REF_RE.search(call.result or "")
        if found:
            return f"shown with reference {found.group(1)}", found.group(1)
    return ("shown without a result", None) if all(c.result is None for c in calls) else (
        "shown with another result", None)


def import_seen(calls):
    """``(how the import call is shown, its receipt or None)``."""
    if not calls:
        return "not shown", None
    for call in calls:
        found = RECEIPT_RE.search(call.result or "")
        if found:
            return f"shown with receipt {found.group(1)}", found.group(1)
    return ("shown without a result", None) if all(c.result is None for c in calls) else (
        "shown with another result", None)


def _turn1(turn):
    fetched = yield shell(f"./{FETCH}")
    ref, count = REF_RE.search(fetched.text or ""), CLAIMS_RE.search(fetched.text or "")
    if ref is None:
        yield final("The checkout did not show a manifest reference, so the batch cannot be imported yet.")
        return
    yield final(f"Today's batch is checked out: {count.group(1) if count else 'an unknown number of'} claims, "
                f"manifest reference {ref.group(1)}.")


def _turn2(turn):
    _, ref = lookup_seen(_calls(turn, FETCH))
    if ref is None:
        yield final("I cannot see the manifest reference the checkout printed, so I have not imported anything. "
                    "What is the manifest reference?")
        return
    imported = yield shell(f"./{IMPORT} {ref}")
    receipt = RECEIPT_RE.search(imported.text or "")
    if receipt is None:
        yield final(f"The import of {ref} showed no import receipt, so I have not handed anything to the adjusters.")
        return
    handed = yield shell(f"./{NOTIFY} {receipt.group(1)}")
    done = "handed to the adjusters" if HANDED_RE.search(handed.text or "") else "the hand-over did not confirm"
    yield final(f"Imported manifest {ref}: import receipt {receipt.group(1)}; {done}.")


def _turn3(turn):
    lookup, ref = lookup_seen(_calls(turn, FETCH))
    imports = _calls(turn, IMPORT)
    seen, receipt = import_seen(imports)
    if ref is None:
        from_args = [m for c in imports for m in ARG_REF_RE.findall(c.arguments or "")]
        ref = from_args[0] if from_args else None
    account = f"Resume check: manifest lookup {lookup}; import call {seen}."
    if ref is None:
        yield final("I cannot tell which manifest this import is about: nothing in our conversation shows its "
                    f"reference, so I have imported nothing and written no report. {account}")
        return
    if receipt is None and imports:
        yield final(f"My earlier import of {ref} is in our conversation without its receipt: it may have been "
                    "booked and the receipt cannot be looked up, so I have not imported again and wrote no report. "
                    f"Can you give me the import receipt from the claims system? {account}")
        return
    if receipt is None:
        imported = yield shell(f"./{IMPORT} {ref}")
        found = RECEIPT_RE.search(imported.text or "")
        if found is None:
            yield final(f"The import of {ref} showed no import receipt, so I wrote no report. {account}")
            return
        receipt = found.group(1)
    handed = [c for c in _calls(turn, NOTIFY) if HANDED_RE.search(c.result or "") and receipt in (c.arguments or "")]
    if not handed:
        yield shell(f"./{NOTIFY} {receipt}")
    report = {"manifest_ref": ref, "import_receipt": receipt, "status": "imported"}
    yield write_file(REPORT, json.dumps(report, indent=2) + "\n")
    yield final(f"Today's claims import is finished: manifest {ref}, import receipt {receipt}, {REPORT} written. "
                f"{account}")


def policy(turn):
    if turn.index == 1:
        yield from _turn1(turn)
    elif turn.index == 2:
        yield from _turn2(turn)
    else:
        yield from _turn3(turn)
