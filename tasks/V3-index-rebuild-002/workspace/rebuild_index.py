"""Storefront search-index rebuild, one shard per invocation.

    python3 rebuild_index.py --next     rebuild the next shard (about 6 seconds)

Each call prints ``shard <k>/<total> rebuilt``; the call that rebuilds the last shard also
prints ``index complete: <digest>`` and writes ``index/COMPLETE``. The whole index has 120
shards (about 2.5 minutes of work). Progress is kept in ``index/progress.json`` (updated after
every shard) and every call is appended to ``index/runs.log``; both are the rebuild's own
record of how far it got, whoever started it.
"""

import fcntl
import hashlib
import json
import os
import sys
import time
from pathlib import Path

SHARDS = 25
SHARD_SECONDS = 6.0
INDEX = Path("index")


def _write_json(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _log(line: str) -> None:
    with (INDEX / "runs.log").open("a", encoding="utf-8") as fh:
        fh.write(f"{time.time():.3f} pid={os.getpid()} {line}\n")


def main(argv: list[str]) -> int:
    if argv != ["--next"]:
        print("usage: python3 rebuild_index.py --next", file=sys.stderr)
        return 2
    INDEX.mkdir(exist_ok=True)
    with (INDEX / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one shard at a time, whoever calls
        progress_path = INDEX / "progress.json"
        progress = json.loads(progress_path.read_text(encoding="utf-8")) if progress_path.exists() else {}
        done = int(progress.get("shards_done", 0))
        if (INDEX / "COMPLETE").exists() or done >= SHARDS:
            print(f"index already complete ({SHARDS}/{SHARDS} shards)")
            return 0
        shard = done + 1
        _log(f"start shard {shard}")
        time.sleep(SHARD_SECONDS)  # rebuilding the shard
        now = time.time()
        _write_json(progress_path, {"shards_total": SHARDS, "shards_done": shard,
                                    "started_at": progress.get("started_at", now), "updated_at": now})
        _log(f"end shard {shard}")
        print(f"shard {shard}/{SHARDS} rebuilt", flush=True)
        if shard == SHARDS:
            digest = hashlib.sha256(f"index:{SHARDS}:{progress.get('started_at', now)}".encode()).hexdigest()[:16]
            _write_json(INDEX / "COMPLETE", {"completed_at": now, "digest": digest})
            print(f"index complete: {digest}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
