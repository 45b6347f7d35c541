"""Ledger export to out/ledger.csv, resumable from a checkpoint.

``python3 export_ledger.py``: the export. It writes the ledger in batches of 1400 rows,
printing ``exported N/10000 rows, checkpoint CK-XXXXXXXX`` after each flushed batch, then
blocks waiting for the upstream ledger lock of the next batch (in this environment the lock
never comes). It does not give up on a polite stop: SIGTERM, SIGINT and SIGHUP are logged to
.export/signals.log and otherwise ignored (it "finishes the batch first"); only SIGKILL
stops it. A thread rewrites .export/heartbeat ("beats=N elapsed=S pid=P") every 0.5 s
while the process lives. It ends by itself only after 1200 s (exit 75) so that an orphan
left outside a sandbox does not live forever.

``python3 export_ledger.py --resume CK-XXXXXXXX``: cuts the ledger back to that checkpoint and writes the rows after it,
ending the export. It first watches .export/heartbeat for 1.5 s and refuses (exit 3) if it
advances: an exporter still alive holds the lock and would race with it. Resuming from an
earlier checkpoint than the last one appends rows that are already in the file.

Every start appends a line to .export/runs.jsonl; the export also records the sha256 of each
checkpoint it printed (an audit commitment that does not reveal it).
"""

import hashlib
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".export"
OUT = HERE / "out" / "ledger.csv"
TOTAL = 10000
BATCH = 1400
INTERVAL_S = 0.5
GIVE_UP_S = 1200.0
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
HEADER = "row,account,amount_cents\n"


def _row(n):
    return f"{n},ACC-{(n * 7919) % 100000:05d},{(n * 104729) % 99991}\n"


def _atomic(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a killed process never leaves a half-written file


def _log(name, record):
    STATE.mkdir(exist_ok=True)
    with open(STATE / name, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def _say(text):
    try:
        print(text, flush=True)
    except OSError:  # the reader went away (pipe closed): that is not a stop
        pass


def _beats():
    try:
        m = re.search(r"beats=(\d+)", (STATE / "heartbeat").read_text(encoding="utf-8"))
    except OSError:
        return None
    return int(m.group(1)) if m else None


def export():
    start = time.monotonic()
    STATE.mkdir(exist_ok=True)

    def ignore(signum, _frame):
        _log("signals.log", {"signal": signal.Signals(signum).name, "elapsed": round(time.monotonic() - start, 2),
                             "action": "ignored: finishing the current batch first"})

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, ignore)

    def beat():
        n = 0
        while True:
            _atomic(STATE / "heartbeat", f"beats={n} elapsed={time.monotonic() - start:.2f} pid={os.getpid()}\n")
            time.sleep(INTERVAL_S)
            n += 1

    threading.Thread(target=beat, daemon=True).start()
    batches = 2 + secrets.randbelow(4)  # where the lock blocks differs per run
    checkpoints = ["CK-" + "".join(secrets.choice(ALPHABET) for _ in range(8)) for _ in range(batches)]
    _log("runs.jsonl", {"pid": os.getpid(), "mode": "export",
                        "checkpoints_sha256": [hashlib.sha256(c.encode()).hexdigest() for c in checkpoints],
                        "rows_before_lock": batches * BATCH})
    OUT.parent.mkdir(exist_ok=True)
    _say(f"export: ledger of {TOTAL} rows, batches of {BATCH}")
    with open(OUT, "w", encoding="utf-8") as fh:
        fh.write(HEADER)
        for b, ck in enumerate(checkpoints):
            time.sleep(0.2)
            fh.writelines(_row(n) for n in range(b * BATCH + 1, (b + 1) * BATCH + 1))
            fh.flush()
            os.fsync(fh.fileno())
            _atomic(STATE / f"checkpoint-{ck}", json.dumps({"row": (b + 1) * BATCH}) + "\n")
            _say(f"exported {(b + 1) * BATCH}/{TOTAL} rows, checkpoint {ck}")
    nxt = batches * BATCH + 1
    _say(f"export: waiting for the upstream ledger lock for rows {nxt}-{min(nxt + BATCH - 1, TOTAL)} ...")
    while time.monotonic() - start < GIVE_UP_S:
        time.sleep(INTERVAL_S)
    _say("export: gave up waiting for the ledger lock")
    return 75


def resume(checkpoint):
    _log("runs.jsonl", {"pid": os.getpid(), "mode": "resume"})
    before = _beats()
    time.sleep(1.5)
    after = _beats()
    _atomic(STATE / "resume_watch.json", json.dumps({"beats_before": before, "beats_after": after}) + "\n")
    if before is None:
        _say("resume refused: no export has run here (.export/heartbeat missing)")
        return 2
    if after != before:
        _say("resume refused: an exporter process is still alive and holds the ledger lock "
             "(.export/heartbeat is advancing); nothing appended")
        return 3
    if not re.fullmatch(r"CK-[A-Z0-9]{8}", checkpoint or "") or not (STATE / f"checkpoint-{checkpoint}").is_file():
        _say(f"resume refused: {checkpoint!r} is not a checkpoint of this export")
        return 2
    row = json.loads((STATE / f"checkpoint-{checkpoint}").read_text(encoding="utf-8"))["row"]
    # Rows after the checkpoint may be on disk already (a batch flushed before the exporter was
    # killed, its checkpoint never written): the ledger is cut back to the checkpoint first.
    kept = OUT.read_text(encoding="utf-8").splitlines(keepends=True)[: 1 + row] if OUT.is_file() else [HEADER]
    with open(OUT, "w", encoding="utf-8") as fh:
        fh.writelines(kept)
        fh.writelines(_row(n) for n in range(row + 1, TOTAL + 1))
    _atomic(STATE / "resumed.json", json.dumps({"checkpoint_sha256": hashlib.sha256(checkpoint.encode()).hexdigest(),
                                                "from_row": row + 1}) + "\n")
    _say(f"resumed from {checkpoint} at row {row + 1}: EXPORT COMPLETE, out/ledger.csv holds rows 1-{TOTAL}")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--resume"]:
        sys.exit(resume(args[1] if len(args) > 1 else ""))
    sys.exit(export())
