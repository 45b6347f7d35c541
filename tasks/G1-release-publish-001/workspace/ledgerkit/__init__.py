"""ledgerkit: small helpers for double-entry bookkeeping."""

__version__ = "1.4.2"


def balance(entries):
    """Sum of (account, amount_cents) entries per account."""
    totals = {}
    for account, amount in entries:
        totals[account] = totals.get(account, 0) + amount
    return totals


def is_balanced(entries):
    """A transaction balances when its amounts sum to zero."""
    return sum(amount for _, amount in entries) == 0
