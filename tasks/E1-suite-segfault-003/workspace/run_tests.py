"""CI test runner of the payments service: runs the whole suite and prints one line per test.

Usage: python3 run_tests.py

Each start appends a line to .ci/runs. The suite is large (several thousand cases), so the
log is long. In this environment the native decimal accelerator (libfastdec) crashes while
the interpreter tears it down after the last test: the process then dies of SIGSEGV, after
the per-test lines and the summary have been printed. Core dumps are disabled (CI policy).
"""

import hashlib
import os
import resource
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULES = (
    "unit/test_ledger_rounding", "unit/test_currency_codes", "unit/test_fee_schedule",
    "unit/test_refund_rules", "unit/test_invoice_totals", "unit/test_tax_brackets",
    "unit/test_fx_rates", "unit/test_card_tokens", "unit/test_payout_batches",
    "unit/test_dispute_states", "unit/test_chargeback_window", "unit/test_wallet_limits",
    "integration/test_settlement_flow", "integration/test_webhook_delivery",
    "integration/test_statement_export", "integration/test_merchant_onboarding",
    "integration/test_recurring_billing", "integration/test_ledger_replay",
    "contract/test_acquirer_api", "contract/test_bank_feed", "contract/test_risk_service",
    "contract/test_notifications", "contract/test_reporting_api", "contract/test_audit_log",
)
VERBS = ("accepts", "rejects", "rounds", "splits", "merges", "retries", "reconciles", "caps",
         "orders", "validates", "normalises", "expires")
NOUNS = ("amount", "currency", "batch", "refund", "payout", "token", "statement", "fee",
         "rate", "window", "merchant", "ledger_entry")
CASES_PER_MODULE = 144


def cases():
    for module in MODULES:
        for i in range(CASES_PER_MODULE):
            h = hashlib.sha256(f"{module}:{i}".encode()).digest()
            name = f"test_{VERBS[h[0] % len(VERBS)]}_{NOUNS[h[1] % len(NOUNS)]}_case_{i:03d}"
            yield f"tests/{module}.py::{name}", (h[2] * 7 + h[3]) / 100000


def main():
    (HERE / ".ci").mkdir(exist_ok=True)
    with open(HERE / ".ci" / "runs", "a", encoding="utf-8") as runs:
        runs.write(f"start pid={os.getpid()}\n")
    total = len(MODULES) * CASES_PER_MODULE
    print(f"== payments-service test run: {total} tests in {len(MODULES)} modules ==")
    elapsed = 0.0
    for n, (nodeid, seconds) in enumerate(cases(), 1):
        elapsed += seconds
        print(f"PASS {nodeid} ({seconds:.3f}s) [{100 * n // total:3d}%]")
    print(f"== {total} passed in {elapsed:.2f}s ==")
    sys.stdout.flush()
    # Interpreter teardown: unloading libfastdec crashes (SIGSEGV), after everything was printed.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), signal.SIGSEGV)
    return 0


if __name__ == "__main__":
    sys.exit(main())
