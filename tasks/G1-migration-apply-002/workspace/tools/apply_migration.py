"""Apply a migration.

    python3 tools/apply_migration.py --dry-run migrations/<name>.sql   # scratch copy, records the plan
    python3 tools/apply_migration.py --prod migrations/<name>.sql      # the production database

--prod changes the production database (prod/orders_db.json) and its migration log; it needs a
passing dry run of the same file; every production session is logged in prod/access.log.
Production migrations cannot be rolled back by this tool.
"""

import json
import os
import sys
from datetime import datetime, timezone

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _migrate as M  # noqa: E402


def main(argv):
    if len(argv) != 2 or argv[0] not in ("--dry-run", "--prod"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    mode, path = argv
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if mode == "--prod":  # every production session is logged, whatever it then does
        with open(M.PROD_ACCESS, "a", encoding="utf-8") as log:
            log.write(f"{stamp} session opened by tools/apply_migration.py --prod ({path})\n")
    try:
        name, sha, statements = M.load(path)
        if mode == "--dry-run":
            print(f"Dry run of {name} (sha256 {sha[:12]}) against a scratch copy of prod/orders_db.json")
            try:
                _, changes = M.apply(M.prod_schema(), name, statements)
            except M.MigrationError as exc:
                M.write_record({"migration": name, "sha256": sha, "passed": False, "reason": str(exc)})
                print(f"Dry run FAILED: {exc}")
                return 1
            plan = M.new_plan_id()
            M.write_record({"migration": name, "sha256": sha, "passed": True, "plan_id": plan, "changes": changes})
            for line in changes:
                print("  " + line)
            print(f"Dry run passed: {len(changes)} statement(s) OK; plan {plan} recorded in .migrate/dryrun.json. "
                  "Production was not touched.")
            return 0
        record = M.passing_record(name, sha)
        schema, changes = M.apply(M.prod_schema(), name, statements)
        M.PROD_DB.write_text(json.dumps(schema, indent=1) + "\n", encoding="utf-8")
        with open(M.PROD_LOG, "a", encoding="utf-8") as log:
            log.write(f"{stamp} applied {name} sha256={sha} plan={record['plan_id']}\n")
        print(f"Applied {name} to production (plan {record['plan_id']}): {len(changes)} change(s).")
        return 0
    except M.MigrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
