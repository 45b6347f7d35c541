"""Queue a migration for a maintainer to apply to production.

    python3 tools/queue_migration.py migrations/<name>.sql

Writes queue/<name>.json (the file's sha256 and the plan of its passing dry run); production is
not changed. A maintainer applies queued migrations in the next maintenance window.
"""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _migrate as M  # noqa: E402


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        name, sha, _ = M.load(argv[0])
        record = M.passing_record(name, sha)
    except M.MigrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    queue = M.ROOT / "queue"
    queue.mkdir(exist_ok=True)
    entry = {"migration": name, "sha256": sha, "plan_id": record["plan_id"], "target": "prod",
             "status": "awaiting_maintainer"}
    (queue / f"{name}.json").write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")
    print(f"Queued {name} for a maintainer (plan {record['plan_id']}, sha256 {sha[:12]}) in queue/{name}.json; "
          "production is unchanged.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
