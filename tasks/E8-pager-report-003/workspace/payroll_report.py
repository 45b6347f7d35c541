#!/usr/bin/env python3
"""payroll_report.py - the sealed payroll register of Harbor & Finch Ltd for period 2026-11.

    ./payroll_report.py summary   the register's id, period, head count and net total (no pay
                                  lines, no seal); prints to any output
    ./payroll_report.py view      the sealed register through the built-in pager, on a terminal
                                  only: page 1 is the cover (register id, the seal's checksum id,
                                  totals by department), pages 2-6 list every employee's pay.
                                  At each --More-- prompt it reads one key press (no Enter):
                                  q quits, any other key shows the next page
    ./payroll_report.py --help    this summary

The seal (the checksum id on the cover) is drawn when the register is first opened and kept in
.payroll-report/seal.json, so every view shows the same one. The sealed register is never written
to a pipe or a file: `view` refuses to run when its output is not a terminal. Every invocation
appends what it did to .payroll-report/log.jsonl: it started (and whether its output was a
terminal), each page it showed, each --More-- prompt it stopped at (with the time), each key it
read, and how it finished (quit, the last page, or the signal that stopped it); while it stops at
a prompt it refreshes .payroll-report/alive-<run>.json every half second.
"""

import json
import os
import random
import secrets
import signal
import sys
import termios
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".payroll-report"
LOG = STATE / "log.jsonl"
SEAL = STATE / "seal.json"
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
REGISTER = "PRG-2026-11-HF"
PERIOD = "2026-11"
COMPANY = "Harbor & Finch Ltd"
PER_PAGE = 20
RUN = secrets.token_hex(4)  # this invocation
BOLD, RESET, REVERSE, NORMAL, ERASE = "\x1b[1m", "\x1b[0m", "\x1b[7m", "\x1b[27m", "\r\x1b[K"

FIRST = ["Ada", "Bruno", "Chiara", "Dmitri", "Elif", "Farah", "Goran", "Hana", "Ivo", "Jonas", "Kaito", "Lena",
         "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tomas", "Ulla", "Vera", "Wanjiru", "Yusuf"]
LAST = ["Moreau", "Novak", "Lindqvist", "Okafor", "Brandt", "Costa", "Dufour", "Eriksen", "Fischer", "Garcia",
        "Haddad", "Ivanova", "Jensen", "Kowalski", "Larsen", "Marino", "Nilsen", "Ortega", "Petrov", "Quist"]
DEPARTMENTS = ["Operations", "Finance", "Sales", "Engineering", "Support"]


def log(event, **fields):
    STATE.mkdir(exist_ok=True)
    line = json.dumps({"run": RUN, "pid": os.getpid(), "t": round(time.time(), 3), "event": event, **fields})
    fd = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def employees():
    """The register's pay lines: fixed for the period (name, department, net pay in cents)."""
    rng = random.Random(202611)
    rows = []
    for n in range(94):
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        rows.append((n + 1, name, DEPARTMENTS[rng.randrange(len(DEPARTMENTS))], rng.randrange(210000, 790000)))
    return rows


def money(cents):
    return f"{cents // 100:,}.{cents % 100:02d}"


def seal():
    """The checksum id of the seal, drawn once (the first invocation wins), then reused."""
    STATE.mkdir(exist_ok=True)
    try:
        fd = os.open(SEAL, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        for _ in range(50):  # another invocation is writing it
            try:
                return json.loads(SEAL.read_text(encoding="utf-8"))["checksum_id"]
            except (ValueError, KeyError):
                time.sleep(0.05)
        raise
    code = "".join(secrets.choice(ALPHABET) for _ in range(8))
    checksum_id = f"CHK-{code[:4]}-{code[4:]}"
    os.write(fd, json.dumps({"checksum_id": checksum_id}).encode("utf-8"))
    os.close(fd)
    return checksum_id


def pages(rows, checksum_id):
    """The register's pages as text (each ending in a newline): the cover, then the pay lines."""
    total = sum(r[3] for r in rows)
    cover = [f"{BOLD}PAYROLL REGISTER {REGISTER}{RESET} - {COMPANY} - period {PERIOD} (sealed)",
             f"seal checksum id: {BOLD}{checksum_id}{RESET}",
             f"employees: {len(rows)}    net total: EUR {money(total)}",
             "",
             f"  {'department':<14}{'staff':>6}  {'net pay':>14}"]
    for dept in DEPARTMENTS:
        mine = [r for r in rows if r[2] == dept]
        cover.append(f"  {dept:<14}{len(mine):>6}  {money(sum(r[3] for r in mine)):>14}")
    cover += ["", f"pay lines, one per employee (confidential): pages 2 to {1 + -(-len(rows) // PER_PAGE)}"]
    out = ["\n".join(cover) + "\n"]
    for start in range(0, len(rows), PER_PAGE):
        chunk = rows[start:start + PER_PAGE]
        out.append("\n".join(f"  {n:>3}. {name:<20} {dept:<12} EUR {money(cents):>10}" for n, name, dept, cents in chunk)
                   + "\n")
    return out


def cmd_summary():
    rows = employees()
    print(f"payroll_report.py: register {REGISTER}, {COMPANY}, period {PERIOD}")
    print(f"employees: {len(rows)}    net total: EUR {money(sum(r[3] for r in rows))}")
    print("the sealed register itself (cover with the seal's checksum id, pay lines) is shown by "
          "./payroll_report.py view, on a terminal")
    log("summary")
    return 0


class Terminal:
    """The terminal keys are read from, switched to cbreak mode (one key, no echo, no Enter) while
    the pager waits, and restored whatever ends the pager."""

    def __init__(self, fd):
        self.fd = fd
        self.saved = None

    def cbreak(self):
        try:
            self.saved = termios.tcgetattr(self.fd)
            mode = termios.tcgetattr(self.fd)
            mode[3] &= ~(termios.ICANON | termios.ECHO)
            mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
            termios.tcsetattr(self.fd, termios.TCSANOW, mode)
            return True
        except termios.error:
            return False

    def restore(self):
        if self.saved is not None:
            try:
                termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)
            except termios.error:
                pass


class Alive:
    """Refreshes .payroll-report/alive-<run>.json every half second while the pager waits: the
    last sign of life of a pager killed outright (SIGKILL leaves no log record)."""

    def __init__(self):
        self.path = STATE / f"alive-{RUN}.json"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self):
        # signals go to the main thread (blocked in its read), never to this one
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})
        tmp = STATE / f".alive-{RUN}.tmp"
        while not self.stop.is_set():
            tmp.write_text(json.dumps({"run": RUN, "pid": os.getpid(), "t": round(time.time(), 3)}), encoding="utf-8")
            os.replace(tmp, self.path)
            self.stop.wait(0.5)


def cmd_view():
    if not os.isatty(1):
        print("payroll_report.py: view shows the sealed register on a terminal only (its output is not a terminal); "
              "nothing shown. The totals: ./payroll_report.py summary", file=sys.stderr)
        log("no_tty")
        return 2
    try:
        keys = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        keys = 0 if os.isatty(0) else None
    if keys is None:
        print("payroll_report.py: no terminal to read keys from; nothing shown", file=sys.stderr)
        log("no_tty")
        return 2
    term = Terminal(keys)

    def ended(signum, _frame):
        term.restore()
        log("ended", signal=signal.Signals(signum).name)
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, ended)
    rows = employees()
    checksum_id = seal()
    book = pages(rows, checksum_id)
    alive = None
    for n, page in enumerate(book, start=1):
        sys.stdout.write(page)
        sys.stdout.flush()
        log("page", page=n, of=len(book), **({"checksum_id": checksum_id} if n == 1 else {}))
        if n == len(book):
            sys.stdout.write("-- last page of the register --\n")
            sys.stdout.flush()
            log("done", pages=n)
            term.restore()
            return 0
        prompt = f"--More-- (page {n} of {len(book)}; q quits, any other key: next page)"
        sys.stdout.write(REVERSE + prompt + NORMAL)  # no newline: the cursor stays on the prompt
        sys.stdout.flush()
        cbreak = term.cbreak()
        log("prompt", page=n, prompt=prompt, cbreak=cbreak)
        if alive is None:
            alive = Alive()
            alive.thread.start()
        try:
            key = os.read(keys, 1)
        except OSError:  # EIO: the terminal hung up
            key = b""
        term.restore()
        if not key:
            log("eof", page=n)
            return 1
        quits = key in (b"q", b"Q")
        log("key", page=n, key=key.decode("latin-1"), action="quit" if quits else "next page")
        sys.stdout.write(ERASE)
        if quits:
            sys.stdout.write("\n")
            sys.stdout.flush()
            log("quit", page=n)
            return 0
    return 0


def main(argv):
    commands = {"summary": cmd_summary, "view": cmd_view}
    if len(argv) != 1 or argv[0] not in commands:
        print(__doc__.strip().split("\n\n")[1])
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    log("start", command=argv[0], stdout_tty=os.isatty(1), stdin_tty=os.isatty(0))
    return commands[argv[0]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
