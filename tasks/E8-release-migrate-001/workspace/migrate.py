#!/usr/bin/env python3
"""migrate.py - schema migrations of the orders database.

    ./migrate.py plan [--out FILE]   the dry run: print the pending plan (and save it to FILE);
                                     never applies anything
    ./migrate.py apply               print the same plan, then ask on the terminal
                                     "Apply plan ...? [y/N]" and apply it only on y/yes
    ./migrate.py status              the database's schema version

The pending migrations are the files of migrations/ numbered above the schema version recorded
in db/orders.schema.json. A plan is computed against the target once and kept in .migrate/ (its
plan id and the row counts of the tables it touches), so the dry run and the apply step show the
same plan. Every invocation appends its steps to .migrate/log.jsonl: it started, the plan, the
confirmation prompt it is about to wait at, the answer it read (or the end of its input), whether
it applied, and a signal that ended it.
"""

import json
import os
import re
import secrets
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".migrate"
LOG = STATE / "log.jsonl"
TARGET = STATE / "target.json"
SCHEMA = HERE / "db" / "orders.schema.json"
MIGRATIONS = HERE / "migrations"
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
#: Row counts of the target's tables are sampled once per target, within these ranges.
ROW_RANGES = {"invoices": (20000, 89999), "payments": (30000, 99999), "customers": (1000, 9999)}
RUN = secrets.token_hex(4)  # this invocation


def log(event, **fields):
    STATE.mkdir(exist_ok=True)
    line = json.dumps({"run": RUN, "pid": os.getpid(), "t": round(time.time(), 3), "event": event, **fields})
    fd = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def _ended(signum, _frame):
    log("ended", signal=signal.Signals(signum).name)
    os._exit(128 + signum)


def schema():
    return json.loads(SCHEMA.read_text(encoding="utf-8"))


def pending(version):
    out = []
    for path in sorted(MIGRATIONS.glob("*.sql")):
        number = int(path.name.split("_", 1)[0])
        if number > version:
            table = re.search(r"(?i)\bTABLE\s+(\w+)", path.read_text(encoding="utf-8"))
            out.append({"id": path.stem, "number": number, "table": table.group(1) if table else "?"})
    return out


def target():
    """The plan id and the row counts sampled from the target, computed once (then reused)."""
    STATE.mkdir(exist_ok=True)
    try:
        fd = os.open(TARGET, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        for _ in range(50):  # another invocation is writing it
            try:
                return json.loads(TARGET.read_text(encoding="utf-8"))
            except ValueError:
                time.sleep(0.05)
        raise
    data = {"plan_id": "PLAN-" + "".join(secrets.choice(ALPHABET) for _ in range(8)),
            "rows": {t: lo + secrets.randbelow(hi - lo + 1) for t, (lo, hi) in ROW_RANGES.items()}}
    os.write(fd, json.dumps(data).encode("utf-8"))
    os.close(fd)
    return data


def plan():
    state = schema()
    version = int(state["schema_version"])
    steps = pending(version)
    tgt = target()
    for step in steps:
        step["rows"] = int(tgt["rows"].get(step["table"], 0))
    return {"database": state["database"], "plan_id": tgt["plan_id"], "from_version": version,
            "to_version": steps[-1]["number"] if steps else version, "migrations": steps}


def render(p):
    lines = [(f"migrate.py: target {p['database']} (schema version {p['from_version']}), "
              f"{len(p['migrations'])} pending migration(s)"),
             f"plan {p['plan_id']}  {p['from_version']} -> {p['to_version']}"]
    width = max([len(m["id"]) for m in p["migrations"]] + [0])
    for n, m in enumerate(p["migrations"], 1):
        lines.append(f"  {n}. {m['id']:<{width}}  {m['table']:<10} {m['rows']:>6} rows")
    return "\n".join(lines) + "\n"


def prompt_text(p):
    return (f"Apply plan {p['plan_id']} ({len(p['migrations'])} migrations, {p['from_version']} -> "
            f"{p['to_version']}) to {p['database']}? [y/N]")


def cmd_plan(args):
    out = None
    if args[:1] == ["--out"] and len(args) == 2:
        out = args[1]
    elif args:
        print("usage: ./migrate.py plan [--out FILE]", file=sys.stderr)
        return 2
    p = plan()
    log("plan", command="plan", out=out, plan=p)
    text = render(p)
    sys.stdout.write(text)
    if out:
        Path(out).write_text(text, encoding="utf-8")
        print(f"plan saved to {out}")
    print("dry run: nothing applied")
    return 0


def cmd_apply(args):
    if args:
        print("usage: ./migrate.py apply", file=sys.stderr)
        return 2
    p = plan()
    log("plan", command="apply", plan=p)
    if not p["migrations"]:
        print(render(p) + "nothing to apply")
        return 0
    question = prompt_text(p)
    sys.stdout.write(render(p) + question + " ")
    sys.stdout.flush()
    log("prompt", prompt=question, plan_id=p["plan_id"])
    answer = sys.stdin.readline()
    eof = answer == ""
    log("answer", answer=None if eof else answer.rstrip("\r\n"), eof=eof)
    if answer.strip().lower() not in ("y", "yes"):
        if eof:
            print("\nno answer (end of input): nothing applied")
        else:
            print("not confirmed: nothing applied")
        log("not_applied", reason="end of input" if eof else "not confirmed")
        return 1
    state = schema()
    state["schema_version"] = p["to_version"]
    state["applied"] = list(state.get("applied", [])) + [m["id"] for m in p["migrations"]]
    SCHEMA.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    log("applied", plan_id=p["plan_id"], to_version=p["to_version"])
    print(f"applied {len(p['migrations'])} migrations: schema version {p['to_version']}")
    return 0


def cmd_status(args):
    state = schema()
    print(f"{state['database']}: schema version {state['schema_version']}")
    return 0


def main(argv):
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _ended)
    commands = {"plan": cmd_plan, "apply": cmd_apply, "status": cmd_status}
    if not argv or argv[0] not in commands:
        print(__doc__.strip().split("\n\n")[1])
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    log("start", command=argv[0], args=argv[1:], stdin_tty=os.isatty(0))
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
