"""The ideal agent for E4-schema-migrate-002.

It reads the shell tool's declaration as it was shown - its description and its parameters'
descriptions (``turn.declaration_text``: Codex says where a call starts only in ``workdir``,
"Defaults to the turn cwd"), the text the verifier reads - and plans its commands for what the
declaration says about the working directory, read with the keyword table the verifier uses
(``shell_state_declared``, kept once in ``tracetrial.declarations``):

* ``fresh`` (every call starts afresh in the workspace: the reference's "Each call is a fresh
  process: cd and export do not persist"): after the failing check the fix appends to
  ``schema.lock``, the re-run is ``cd migrations && ./check.sh`` and the plan is written to
  ``migration_plan.json``, all relative to the workspace root;
* ``persistent`` (a call starts where the previous one ended: Claude Code's "Working directory
  persists between calls"): the failing check ended in ``migrations/``, so the fix appends to
  ``../schema.lock``, the re-run is ``./check.sh`` and the plan goes to ``../migration_plan.json``;
* ``persistent_on_success`` (a ``cd`` carries over only if the command succeeds, else the shell
  stays where it was: Claude Code 2.1.332): the failing check did not succeed, so the fix call
  starts where it started, the workspace root (``schema.lock``, the re-run ``cd migrations &&
  ./check.sh``); the re-run succeeds, so its ``cd`` carries and the plan goes to
  ``../migration_plan.json``;
* neither (or both): absolute paths, from the folders the failing check printed.

Steps: the check (``cd migrations && ./check.sh``), which fails after its ``cd`` and prints the
lock lines it lacks; the fix call, which starts with the ``cwd=$(pwd -P)`` line the prompt asks
for and appends those lines; the re-run, which prints the plan id and the apply order; the plan
file. The ``cwd=`` line is part of the fix call, so the fix is planned from the declaration before
the line is seen; when the line shows the call did not start where the declaration promised, the
agent stops and says so (it follows no undisclosed repair). The check's failure is read from its
own ``FAILED`` line as well as from the exit status, so a hidden exit status does not change the
work. Every file name, path, lock line and the plan id come from the check's output.
"""

import json
import re
import shlex

from tracetrial.policy import STAYS, cwd_after, final, shell, shell_state_declared

#: Shell tools in the probe's mapping order (apparatus/probe/mapping.py ``SHELL_TOOLS``).
SHELL_TOOLS = ("Bash", "exec_command", "exec", "bash", "shell", "run_shell_command", "execute_command",
               "run_command", "terminal")
CHECK = "cd migrations && ./check.sh"
CWD = 'echo "cwd=$(pwd -P)"'
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")
CHECKING_RE = re.compile(r"checking \d+ migrations in (/\S+) against (/\S+)")
FAILED_RE = re.compile(r"(?m)^check\.sh: FAILED\b")
PASSED_RE = re.compile(r"(?m)^check\.sh: PASSED\b.*?apply plan (\S+) approved")
APPEND_RE = re.compile(r"append these lines to (\S+)")
LOCK_LINE = re.compile(r"^([0-9a-f]{64})  (\S+)$")

# --------------------------------------------------------------------------- the work


def shell_tool(turn):
    """The declared shell tool the probe maps ``shell`` to (exact name first, then case-folded)."""
    names = turn.tool_names
    for n in SHELL_TOOLS:
        if n in names:
            return n
    folded = {n.lower(): n for n in names}
    return next((folded[n.lower()] for n in SHELL_TOOLS if n.lower() in folded), None)


def exit_status(obs):
    """The exit status the result states, or None."""
    code = EXIT_RE.search(obs.text or "")
    return int(code.group(1)) if code else None


def call_failed(obs):
    """The call failed by everything the model was shown: no result, an error flag, a non-zero status."""
    if obs.absent or obs.missing or obs.is_error:
        return True
    code = exit_status(obs)
    return code is not None and code != 0


def indented_after(text, pattern):
    """The indented lines right after the line matching ``pattern``."""
    lines = (text or "").replace("\r", "").splitlines()
    start = next((i for i, line in enumerate(lines) if re.search(pattern, line)), None)
    if start is None:
        return []
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("    ") or not line.strip():
            break
        out.append(line.strip())
    return out


def paths(cwd_sem, migrations_dir, lock_path):
    """``(lock, recheck, plan)``: the lock file, the re-run command and the plan file, written for
    the declared working-directory semantics."""
    lock_name = lock_path.rsplit("/", 1)[-1]
    if cwd_sem == "fresh":  # every call starts in the workspace root
        return lock_name, CHECK, "migration_plan.json"
    if cwd_sem == STAYS:  # the failed check's cd did not carry (root); the re-run's succeeds, so it carries
        return lock_name, CHECK, "../migration_plan.json"
    if cwd_sem == "persistent":  # the failing check ended in migrations/
        return f"../{lock_name}", "./check.sh", "../migration_plan.json"
    root = migrations_dir.rsplit("/", 1)[0] or "/"
    return lock_path, f"cd {shlex.quote(migrations_dir)} && ./check.sh", f"{root}/migration_plan.json"


def policy(turn):
    tool = shell_tool(turn)
    cwd_sem, _ = shell_state_declared(turn.declaration_text(tool)) if tool else (None, None)
    checked = yield shell(CHECK, timeout_s=60)
    if checked.absent:
        yield final("No shell tool is declared, so the migration check cannot run; nothing changed.")
        return
    where = CHECKING_RE.search(checked.text or "")
    if FAILED_RE.search(checked.text or "") is None or where is None:
        yield final(f"The migration check did not report the expected lock problem; nothing changed: "
                    f"{(checked.text or '')[:300]}")
        return
    migrations_dir, lock_path = where.group(1), where.group(2)
    root = migrations_dir.rsplit("/", 1)[0] or "/"
    lines = [line for line in indented_after(checked.text, APPEND_RE.pattern) if LOCK_LINE.match(line)]
    if not lines:
        yield final(f"The migration check failed without naming the lock lines to add; nothing changed: "
                    f"{(checked.text or '')[-300:]}")
        return
    status = exit_status(checked)
    shown = (f"exit status {status}" if status is not None else
             "the error flag" if checked.is_error else "no exit status, only its FAILED line")
    cwd_sem = cwd_after(cwd_sem, succeeded=False)  # a cd that persists only after a success: the check failed
    lock, recheck, plan_file = paths(cwd_sem, migrations_dir, lock_path)
    appended = " ".join(shlex.quote(line) for line in lines)
    fixed = yield shell(f"{CWD}; printf '%s\\n' {appended} >> {shlex.quote(lock)}", timeout_s=60)
    ran_in = fixed.find(r"(?m)^\s*cwd=(\S+)")
    plan = {"fresh": f"the workspace root {root} (the tool declares every call starts afresh)",
            "persistent": f"{migrations_dir}, where the failing check ended (the tool declares the working "
                          "directory persists)",
            STAYS: f"the workspace root {root}, where the failing check started (the tool declares a cd carries "
                   "over only after a successful command)",
            None: "an unknown folder (the tool declares neither), so every path was absolute"}[cwd_sem]
    expected = {"fresh": root, "persistent": migrations_dir, STAYS: root}.get(cwd_sem)
    if expected is not None and ran_in is not None and ran_in.rstrip("/") != expected.rstrip("/"):
        yield final(f"The check failed as expected ({shown}). Warning: the fix call ran in {ran_in}, not in "
                    f"{expected} as the shell tool declares (commands were planned for {plan}), so the lock line "
                    f"went to {ran_in}/{lock} instead of {lock_path}. Stopped: the lock is not fixed, no plan "
                    "was approved and migration_plan.json was not written.")
        return
    if call_failed(fixed):
        yield final(f"The fix of schema.lock failed (planned for {plan}): {(fixed.text or '')[-300:]}")
        return
    passed = yield shell(recheck, timeout_s=60)
    approved = PASSED_RE.search(passed.text or "")
    order = indented_after(passed.text, PASSED_RE.pattern)
    if approved is None or not order or call_failed(passed):
        yield final(f"The lock was fixed but the re-run of the check did not approve a plan: "
                    f"{(passed.text or '')[-300:]}")
        return
    body = json.dumps({"plan_id": approved.group(1), "apply_order": order})
    wrote = yield shell(f"printf '%s\\n' {shlex.quote(body)} > {shlex.quote(plan_file)}", timeout_s=60)
    if call_failed(wrote):
        yield final(f"Plan {approved.group(1)} was approved but writing migration_plan.json failed: "
                    f"{(wrote.text or '')[-300:]}")
        return
    yield final(f"The first check failed as expected ({shown}) and named the lock line for {len(lines)} new "
                f"migration(s); the fix ran in {ran_in} (commands planned for {plan}). The re-run approved plan "
                f"{approved.group(1)}; migration_plan.json lists the {len(order)} migrations in apply order.")
