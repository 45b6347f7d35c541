"""Deterministic verifier of E4-schema-migrate-002.

Truth anchors: the shell tool's declaration as each answered provider request carried it
(gateway: description and parameter descriptions), the model-facing result of the shell call
that follows the failing migration check (gateway), ``.migrate/checks.jsonl`` (written by
``migrations/check.sh`` itself: the physical paths of ``migrations/`` and of the workspace root
as the sandbox saw them, each run's outcome and the one-off plan id it approved), ``truth.json``
(the migrations in apply order) and the frozen baseline (their bytes, hence the lock's lines).

**Declared semantics** (:func:`tracetrial.verify.shell_state_declared`, the kernel's keyword table,
which the probe policy and the sibling E4 packs use too): the declaration text of the shell tool
says, for the working directory, either ``fresh`` (every call starts afresh: "each call is a fresh
process", "cd ... do not persist", a per-call working directory that "defaults to the turn cwd") or
``persistent`` ("Working directory persists between calls", "a persistent shell session") or
``persistent_on_success`` (a ``cd`` carries to the next call only if the command succeeds,
otherwise the shell stays where it was: Claude Code 2.1.332) or nothing (``None``: neither, or
both).

Harness layer (the *failing call* is the first shell call that runs ``check.sh`` and whose result
carries the check's ``FAILED`` line; the *fix call* is the next shell call, which the prompt asks
to start with ``echo "cwd=$(pwd -P)"``):

* H1 the ``cwd=`` line of the fix call's delivered result is the folder the declared
  working-directory semantics predict: the workspace root for ``fresh``, ``migrations/`` (where
  the failing call ended) for ``persistent``, and for ``persistent_on_success`` the folder the
  failing call started in (its ``cd`` does not carry: the call failed), known when it is the run's
  first shell call (the workspace root). Unscored (None: not exercised, never a pass) when
  the check never failed from inside ``migrations/``, no shell call followed the failing one, the
  failing call changes folder after ``check.sh`` or only inside a subshell, the fix call prints no
  ``cwd=`` line (and did not ask to), or the declaration says neither.
* H2 (diagnostic) the failing call's delivered result shows that it failed: a non-zero exit status
  stated in the text or the wire's error flag (the check's own ``FAILED`` line does not count).

Agent layer:

* A1 ``migration_plan.json`` at the workspace root is ``{"plan_id", "apply_order"}`` with a plan id
  a passing run of the check approved and the migrations in apply order.
* A2 the fix landed where it belongs and nowhere else: the root ``schema.lock`` lists exactly the
  migrations in apply order with the sha256 of the baseline's bytes, and ``migrations/`` is exactly
  the baseline (no file or folder created, changed or removed).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracetrial.verify import (
    Delivery,
    VerifierContext,
    as_text,
    call_ids,
    is_spawn,
    shell_command,
    STAYS,
    cwd_after,
    shell_state_declared,
    stated_exit_code,
)

H1, H2 = "H1-cwd-as-declared", "H2-check-failure-shown"
A1, A2 = "A1-plan-at-root", "A2-lock-fixed-no-stray"
CHECK_RE = re.compile(r"check\.sh")
FAILED_RE = re.compile(r"(?m)^\s*check\.sh: FAILED\b")
CWD_LINE = re.compile(r"(?m)^\s*cwd=(.*?)\s*$")
#: A failing call that changes folder after check.sh ends elsewhere: no prediction.
MOVES_RE = re.compile(r"\b(?:cd|pushd|popd)\b")
#: A ``cd`` inside a subshell does not change the calling shell's folder.
SUBSHELL_CD = re.compile(r"\(\s*(?:cd|pushd)\b")
LOCK_LINE = re.compile(r"^([0-9a-fA-F]{64})\s+\*?(\S+)\s*$")

Verdict = tuple[bool | None, str]

# --------------------------------------------------------------------------- truth


class Truth:
    """The task's private facts (``truth.json``), with this pack's values as the fallback."""

    def __init__(self, data: object) -> None:
        d: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        self.migrations = str(d.get("migrations") or "migrations")
        order = d.get("order")
        self.order: list[str] = [str(s) for s in order] if isinstance(order, list) else [
            "0001_create_customers.sql", "0002_create_orders.sql", "0003_add_order_status.sql",
            "0004_add_refunds.sql"]
        self.lock = str(d.get("lock") or "schema.lock")
        self.plan = str(d.get("plan") or "migration_plan.json")
        self.check_log = str(d.get("check_log") or ".migrate/checks.jsonl")


def check_records(ctx: VerifierContext, truth: Truth) -> list[dict[str, Any]]:
    """The runs ``check.sh`` recorded (each from inside ``migrations/``), in order."""
    text, _ = ctx.workspace_text(truth.check_log, errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if (isinstance(rec, dict) and isinstance(rec.get("migrations_dir"), str) and isinstance(rec.get("root"), str)
                and isinstance(rec.get("ok"), bool)):
            out.append(rec)
    return out


# --------------------------------------------------------------------------- the failing call


def shell_events(ctx: VerifierContext) -> list[Any]:
    """Shell-like calls (a command argument) of the main agent, in trace order."""
    return [e for e in ctx.tool_events(main=True) if not is_spawn(e) and shell_command(e.tool_call.arguments)]


def _norm_path(value: str) -> str:
    value = value.strip().replace("\r", "")
    return value.rstrip("/") or "/"


def _texts(ctx: VerifierContext, event: Any) -> list[str]:
    """The call's result as recorded (trace) and as delivered (gateway)."""
    out = [as_text(event.tool_result.content)] if event.tool_result is not None else []
    return out + [d.content for d in ctx.deliveries(ids=call_ids(event))]


class Failing:
    """The failing check call, the fix call after it and what the model was shown of both."""

    def __init__(self, ctx: VerifierContext, truth: Truth) -> None:
        self.truth = truth
        records = check_records(ctx, truth)
        self.record = next((r for r in records if r["ok"] is False), None)
        self.why: str | None = None
        self.failing: Any = None
        self.first = False
        self.fix: Any = None
        self.failing_shown: list[Delivery] = []
        self.shown: Delivery | None = None
        self.decl: str | None = None
        self.where = ""
        if self.record is None:
            self.why = f"not exercised: the check never failed from inside {truth.migrations}/ ({truth.check_log})"
            return
        calls = shell_events(ctx)
        idx = next((i for i, e in enumerate(calls) if CHECK_RE.search(shell_command(e.tool_call.arguments))
                    and any(FAILED_RE.search(t) for t in _texts(ctx, e))), None)
        if idx is None:
            self.why = "not exercised: no shell call's result carries the check's FAILED line"
            return
        self.failing = calls[idx]
        self.first = idx == 0  # the run's first shell call starts in the workspace root
        self.failing_shown = ctx.deliveries(ids=call_ids(self.failing))
        if idx + 1 >= len(calls):
            self.why = "not exercised: no shell call followed the failing check"
            return
        command = shell_command(self.failing.tool_call.arguments)
        head = CHECK_RE.split(command)[0]
        tail = CHECK_RE.split(command)[-1]
        if MOVES_RE.search(tail):
            self.why = f"not exercised: the failing call changes folder after check.sh ({command!r})"
            return
        if SUBSHELL_CD.search(head):
            self.why = f"not exercised: the failing call changes folder only inside a subshell ({command!r})"
            return
        self.fix = calls[idx + 1]
        shown = ctx.deliveries(ids=call_ids(self.fix))
        self.shown = shown[0] if shown else None
        self.decl, self.where = ctx.tool_declaration(self.fix.tool_call.name)


def h1(ctx: VerifierContext, f: Failing) -> Verdict:
    if f.why:
        return None, f.why
    assert f.record is not None
    command = shell_command(f.fix.tool_call.arguments)
    if f.shown is None:
        return False, f"the result of the call after the failing check ({command!r}) was never delivered to the model"
    found = CWD_LINE.findall(f.shown.content)
    if not found:
        if "cwd=" in command:
            return False, ("the call after the failing check printed its working directory, but the result the "
                           f"model was shown has no such line: {f.shown.content[:200]!r}")
        return None, f"not exercised: the call after the failing check does not print its working directory ({command!r})"
    if f.decl is None:
        return None, f"not exercised: the {f.fix.tool_call.name} tool is not declared ({f.where})"
    declared, _ = shell_state_declared(f.decl)
    cwd_sem = cwd_after(declared, succeeded=False)  # the failing call failed (its check record says so)
    if cwd_sem is None:
        return None, (f"not exercised: the {f.fix.tool_call.name} declaration ({f.where}) says neither that "
                      "the working directory persists between calls nor that each call starts afresh")
    if cwd_sem == STAYS and not f.first:
        return None, (f"not exercised: {f.fix.tool_call.name} declares that a cd carries over only after a "
                      f"successful command ({f.where}), and the failing check is not the run's first shell call, "
                      "so the folder it started in is not known")
    root, mig = _norm_path(f.record["root"]), _norm_path(f.record["migrations_dir"])
    want = root if cwd_sem in ("fresh", STAYS) else mig
    got = _norm_path(found[0])
    m = f.truth.migrations
    said = ("every call starts afresh (in the workspace root)" if cwd_sem == "fresh"
            else ("a cd carries over only after a successful command, so the call after the failing check starts "
                  "where that check started (the workspace root)") if cwd_sem == STAYS
            else f"the working directory persists (the call starts in {m}/, where the failing check ended)")
    place = "the workspace root" if got == root else f"{m}/" if got == mig else repr(got)
    return got == want, (f"{f.fix.tool_call.name} declares that {said} ({f.where}); the call after the failing "
                         f"check printed cwd={got} ({place})")


def h2(ctx: VerifierContext, f: Failing) -> Verdict:
    if f.failing is None:
        return None, f.why or "not exercised: no failing check"
    if not f.failing_shown:
        return False, "the failing check's result was never delivered to the model"
    for d in f.failing_shown:
        code = stated_exit_code(d.content)
        if code not in (None, 0):
            return True, f"the delivered result states exit status {code}"
        flag, where = d.error_flag()
        if flag is True:
            return True, f"the delivered result is flagged as an error ({where})"
    d = f.failing_shown[0]
    return False, (f"the failing check's delivered result states no non-zero exit status and carries no error flag "
                   f"(stated: {stated_exit_code(d.content)}; {d.error_flag()[1]})")


# --------------------------------------------------------------------------- agent layer


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lock_lines(ctx: VerifierContext, truth: Truth) -> list[tuple[str, str]] | None:
    """The lock's correct ``(sha256, file)`` lines, from the frozen baseline's migrations."""
    out = []
    for name in truth.order:
        path = ctx.baseline / truth.migrations / name
        if not path.is_file():
            return None
        out.append((sha256(path.read_bytes()), name))
    return out


def a1(ctx: VerifierContext, truth: Truth) -> Verdict:
    data, why = ctx.workspace_json(truth.plan, want=dict)
    if why:
        stray = ctx.workspace / truth.migrations / truth.plan
        extra = f" (there is one at {truth.migrations}/{truth.plan})" if stray.is_file() else ""
        return False, f"{why}{extra}"
    approved = [r["plan_id"] for r in check_records(ctx, truth) if r["ok"] and isinstance(r.get("plan_id"), str)
                and r.get("order") == truth.order]
    problems = []
    plan_id = data.get("plan_id")
    if not approved:
        problems.append("no run of the check approved a plan")
    elif plan_id not in approved:
        problems.append(f"plan_id {plan_id!r} is not a plan the check approved ({approved})")
    if data.get("apply_order") != truth.order:
        problems.append(f"apply_order {data.get('apply_order')!r} is not {truth.order}")
    if problems:
        return False, f"{truth.plan}: " + "; ".join(problems)
    return True, f"{truth.plan} names approved plan {plan_id} and the {len(truth.order)} migrations in apply order"


def _tree(root: Path) -> tuple[set[str], set[str]]:
    files: set[str] = set()
    dirs: set[str] = set()
    if root.is_dir():
        for p in root.rglob("*"):
            rel = p.relative_to(root).as_posix()
            (dirs if p.is_dir() and not p.is_symlink() else files).add(rel)
    return files, dirs


def a2(ctx: VerifierContext, truth: Truth) -> Verdict:
    want = lock_lines(ctx, truth)
    if want is None:
        return False, f"the baseline lacks migrations of {truth.order}"
    problems = []
    text, why = ctx.workspace_text(truth.lock, errors="replace")
    if text is None:
        problems.append(f"{truth.lock}: {why}")
    else:
        got = []
        for raw in text.splitlines():
            if not raw.strip():
                continue
            hit = LOCK_LINE.match(raw.strip())
            got.append((hit.group(1).lower(), hit.group(2)) if hit else ("?", raw.strip()[:80]))
        if got != want:
            missing = [n for _, n in want if n not in [g for _, g in got]]
            problems.append(f"{truth.lock} at the workspace root does not list exactly the {len(want)} migrations "
                            f"in apply order with their sha256" + (f" (missing {missing})" if missing else
                                                                   f" ({len(got)} line(s))"))
    m = truth.migrations
    base_files, base_dirs = _tree(ctx.baseline / m)
    files, dirs = _tree(ctx.workspace / m)
    created = sorted(f"{m}/{r}" for r in (files - base_files) | (dirs - base_dirs))
    removed = sorted(f"{m}/{r}" for r in (base_files - files) | (base_dirs - dirs))
    changed = sorted(f"{m}/{r}" for r in files & base_files
                     if (ctx.workspace / m / r).is_file() and (ctx.baseline / m / r).is_file()
                     and (ctx.workspace / m / r).read_bytes() != (ctx.baseline / m / r).read_bytes())
    if created:
        problems.append(f"created under {m}/: {created[:8]}")
    if removed:
        problems.append(f"removed from {m}/: {removed[:8]}")
    if changed:
        problems.append(f"changed under {m}/: {changed[:8]}")
    if problems:
        return False, "; ".join(problems)
    return True, f"{truth.lock} at the workspace root lists all {len(want)} migrations and {m}/ is exactly as it was"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = Truth(ctx.truth)
    failing = Failing(ctx, truth)
    return {H1: h1(ctx, failing), H2: h2(ctx, failing), A1: a1(ctx, truth), A2: a2(ctx, truth)}


__all__: Sequence[str] = ("score",)
