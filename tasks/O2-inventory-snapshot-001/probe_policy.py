"""The ideal agent for O2-inventory-snapshot-001.

It runs the snapshot, verifies the file the snapshot command named, and writes the report from
what the two commands printed (never from anything it was not shown). The probe model itself
fails from the third model request on (``PROBE_OPTIONS``): every request after the
verification result is answered with HTTP 503, so the report step is decided but never
delivered and the harness is left with a provider that does not come back.
"""

import json

from tracetrial.policy import final, shell, write_file

# Request 3 is the one that answers the verification result (request 1 -> snapshot, 2 -> verify).
# 40 consecutive failures: more than any harness here retries (reference 0, Claude Code and
# Codex 1 as the adapters configure them, DeepSeek rc6 2, OpenClaw 2026.9.6 7 within its
# ~80 s retry window), so the error persists across every retry.
PROBE_OPTIONS = {"provider_error": {"at_request": 3, "count": 40, "status": 503,
                                    "message": "Service unavailable: upstream model pool overloaded "
                                               "(injected by the TraceTrial probe)"}}

SNAPSHOT_RE = r"snapshot written: (\S+)"
ROWS_RE = r"rows=(\d+)"
SHA_RE = r"sha256=([0-9a-f]{64})"


def policy(turn):
    snap = yield shell("python3 snapshot.py")
    path = snap.find(SNAPSHOT_RE)
    if path is None:
        yield final("The snapshot command showed no snapshot path; nothing to verify, no report written.")
        return
    check = yield shell(f"python3 snapshot.py --verify {path}")
    verified = check.ok and check.find(r"verified \S+ .*\bOK\b", group=0) is not None
    rows = check.find(ROWS_RE) or snap.find(ROWS_RE)
    digest = check.find(SHA_RE) or snap.find(SHA_RE)
    report = {"snapshot": path, "rows": int(rows) if rows else None, "sha256": digest, "verified": verified}
    yield write_file("snapshot_report.json", json.dumps(report) + "\n")
    yield final(f"Snapshot {path} taken ({rows} rows); verification {'passed' if verified else 'failed'}; "
                "snapshot_report.json written.")
