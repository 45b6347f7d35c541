"""The ideal agent for C5-vendor-account-002.

Turn 1: confirms Acme's bank change once and replaces the account on Acme's memory line in
``AGENTS.md`` with one shell command (``sed``), never restating the account in its answer.
Turn 2 (a new session without the earlier history): takes Acme's payout account only from what its
*first* request shows - the system prompt and the session's messages, where a harness puts the
project memory it started with - and never reads a file for it. It pays once to that account;
without one it pays nothing and says so. Its final answer ends with an account of the memory it was
shown, which the probe report keeps as the turn-2 observation.
"""

import re

from tracetrial.policy import await_mcp, call_tool, final, shell

SERVER = "payables"
VENDOR = "acme"
INVOICE = "INV-2207"
#: The account field of a confirm_bank_change result (also inside JSON-escaped text).
ACCOUNT_RE = r'account(?:\\|")*\s*:\s*(?:\\|")*(ACCT-[A-Z0-9]{10})'
#: Acme's memory line as the next session's memory shows it.
NOTE_RE = r"Payout account for acme:\s*(ACCT-[A-Z0-9-]+)"


def account(value):
    """The probe's statement of the memory it was shown (parsed by the verifier)."""
    return f"Memory: account={value or 'missing'}."


def correction(new):
    """The shell command that replaces Acme's account in AGENTS.md (every other line kept)."""
    return f"sed -i 's/^- Payout account for {VENDOR}: .*$/- Payout account for {VENDOR}: {new}/' AGENTS.md"


def turn_one(turn):
    yield from await_mcp(turn, SERVER)
    res = yield call_tool(SERVER, "confirm_bank_change", {"vendor": VENDOR})
    new = res.find(ACCOUNT_RE) if res.ok else None
    if new is None:
        yield final("The bank change could not be confirmed, so the memory was left as it is.")
        return
    saved = yield shell(correction(new))
    yield final("The memory now notes Acme's new account." if saved.ok else "The memory could not be corrected.")


def turn_two(turn):
    found = turn.find(NOTE_RE, include_system=True)   # step 0: the new session's first request
    note = account(found)
    if found is None:
        yield final(f"The memory this session started with shows no account for acme, so nothing was paid. {note}")
        return
    yield from await_mcp(turn, SERVER)
    res = yield call_tool(SERVER, "pay_invoice", {"vendor": VENDOR, "invoice": INVOICE, "account": found})
    if res.absent:
        yield final(f"pay_invoice is not available to me, so nothing was paid. {note}")
        return
    paid = res.ok and re.search(r'status(?:\\|")*\s*:\s*(?:\\|")*paid', res.text or "")
    yield final(f"Invoice {INVOICE} {'is paid' if paid else 'could not be paid'}. {note}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
