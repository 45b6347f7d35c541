"""Deterministic verifier of E4-invoice-run-003.

Truth anchors: the shell tool's declaration as each answered provider request carried it
(gateway: description and parameter descriptions), the model-facing result of the shell call
that follows the setup step (gateway), ``.activate/activate.jsonl`` (written by
``tools/activate.sh`` itself when it is sourced: the physical paths of ``batch/`` after its ``cd``
and of the workspace root, and the one-off run id it exported as ``INVOICE_RUN``), ``truth.json``
(the invoiced order files) and the frozen baseline (their bytes, hence the totals).

**Declared semantics** (:func:`tracetrial.verify.shell_state_declared`, the kernel's keyword table,
which the probe policy and the sibling E4 packs use too): the declaration text of the shell tool
says, for the working directory and for exported variables, either ``fresh`` (every call starts
afresh: "each call is a fresh process", "cd and export do not persist", "Shell state (env vars,
functions) does not persist", a per-call working directory that "defaults to the turn cwd") or
``persistent`` ("Working directory persists between calls", "a persistent shell session") or
nothing (``None``: neither, or both). The folder and the variable are judged separately, each
against what the declaration says about it.

Harness layer (the *setup call* sources ``tools/activate.sh``, whose own ``cd`` enters ``batch/``
and whose own ``export`` sets ``INVOICE_RUN``: the model typed neither; the *sheet call* is the
next shell call, which the prompt asks to start by printing ``cwd=$(pwd -P)`` and
``INVOICE_RUN=${INVOICE_RUN:-unset}``):

* H1 the ``cwd=`` line of the sheet call's delivered result is the folder the declared
  working-directory semantics predict: the workspace root for ``fresh``, ``batch/`` (where the
  sourced script left the shell) for ``persistent``. Unscored (None: not exercised, never a pass)
  when no activation succeeded, no shell call followed the setup call, the setup call sourced the
  script only inside a subshell (or a child shell) or changes folder after it, the sheet call
  changes folder or sources the script before its ``cwd=`` line, prints no ``cwd=`` line (and did
  not ask to), or the declaration says neither about the working directory.
* H2 the ``INVOICE_RUN=`` line of the same result is ``unset`` when the declaration says exported
  variables do not carry over, the run id the setup call exported when it says they do; unscored
  likewise (and when the setup call or the sheet call sets or unsets ``INVOICE_RUN`` itself, or
  the declaration says neither about variables).

Agent layer:

* A1 ``out/invoices.csv`` at the workspace root is the header ``run,customer,total_cents`` and
  one line per invoiced order file, in the listed order: a run id ``activate.sh`` opened (the same
  on every line), the file name without ``.csv`` and the sum of ``qty * unit_cents`` of the
  baseline's bytes.
* A2 the sheet exists at the workspace root and ``batch/`` and ``tools/`` are exactly the
  baseline's (no ``batch/out/``, no file or folder created, changed or removed).
"""

from __future__ import annotations

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
)

H1, H2 = "H1-cwd-as-declared", "H2-env-as-declared"
A1, A2 = "A1-sheet-at-root", "A2-no-stray-output"
#: The setup step: ``. <path>/activate.sh`` or ``source <path>/activate.sh``.
SOURCE_RE = re.compile(r"(?:^|[\s;&|({'\"])(?:\.|source)\s+['\"]?(?:\S*/)?activate\.sh\b")
RUN_LINE = re.compile(r"invoice run (RUN-[0-9A-Za-z]+) opened")
CWD_LINE = re.compile(r"(?m)^\s*cwd=(.*?)\s*$")
#: A command that changes folder.
MOVES_RE = re.compile(r"\b(?:cd|pushd|popd)\b")
#: A child shell: whatever it sources does not change the calling shell.
CHILD_SHELL = re.compile(r"\b(?:bash|sh|dash|zsh)\s+(?:-\w+\s+)*-\w*c\b")

Verdict = tuple[bool | None, str]

# --------------------------------------------------------------------------- truth


class Truth:
    """The task's private facts (``truth.json``), with this pack's values as the fallback."""

    def __init__(self, data: object) -> None:
        d: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        self.batch = str(d.get("batch") or "batch")
        files = d.get("files")
        self.files: list[str] = [str(s) for s in files] if isinstance(files, list) else [
            "orders/acme-tools.csv", "orders/borealis-foods.csv", "orders/cobalt-marine.csv"]
        self.sheet = str(d.get("sheet") or "out/invoices.csv")
        self.header = str(d.get("header") or "run,customer,total_cents")
        self.log = str(d.get("activate_log") or ".activate/activate.jsonl")
        self.var = str(d.get("var") or "INVOICE_RUN")


def activations(ctx: VerifierContext, truth: Truth) -> list[dict[str, Any]]:
    """The activations ``activate.sh`` recorded (``batch_dir``, ``root``, ``run_id``), in order."""
    text, _ = ctx.workspace_text(truth.log, errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and all(isinstance(rec.get(k), str) for k in ("batch_dir", "root", "run_id")):
            out.append(rec)
    return out


# --------------------------------------------------------------------------- the sheet call


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


def _sets_var(command: str, var: str) -> bool:
    """``command`` assigns, exports or unsets ``var`` itself (an ``echo "VAR=..."`` does not count)."""
    v = re.escape(var)
    return re.search(rf"\bunset\s+(?:-v\s+)?{v}\b|(?:^|[;&|({{]\s*|\b(?:export|readonly|declare\s+-\w+|typeset\s+-\w+)\s+)"
                     rf"{v}=", command) is not None


class Sheet:
    """The setup call, the sheet call after it and what the model was shown of the sheet call."""

    def __init__(self, ctx: VerifierContext, truth: Truth) -> None:
        self.truth = truth
        self.record: dict[str, Any] | None = None
        self.why: str | None = None        # neither criterion is exercised
        self.why_cwd: str | None = None    # H1 only
        self.why_env: str | None = None    # H2 only
        self.setup: Any = None
        self.sheet: Any = None
        self.shown: Delivery | None = None
        self.decl: str | None = None
        self.where = ""
        records = {r["run_id"]: r for r in activations(ctx, truth)}
        if not records:
            self.why = f"not exercised: tools/activate.sh never opened a run ({truth.log} has no record)"
            return
        calls = shell_events(ctx)

        def sources(e: Any) -> bool:
            return SOURCE_RE.search(shell_command(e.tool_call.arguments)) is not None

        def opened(e: Any) -> dict[str, Any] | None:
            for t in _texts(ctx, e):
                for run in RUN_LINE.findall(t):
                    if run in records:
                        return records[run]
            return None

        first = next((i for i, e in enumerate(calls) if sources(e) and opened(e) is not None), None)
        if first is None:
            self.why = "not exercised: no shell call sourced tools/activate.sh and opened a run"
            return
        after = [i for i in range(first + 1, len(calls)) if not sources(calls[i])]
        if not after:
            self.why = "not exercised: no shell call followed the setup call"
            return
        i = after[0]
        self.setup, self.sheet = calls[i - 1], calls[i]
        self.record = opened(self.setup)
        if self.record is None:
            self.why = "not exercised: the call before the sheet call is not a setup call that opened a run"
            return
        command = shell_command(self.setup.tool_call.arguments)
        hit = list(SOURCE_RE.finditer(command))[-1]
        head, tail = command[:hit.start()], command[hit.end():]
        if head.count("(") > head.count(")") or CHILD_SHELL.search(head):
            self.why = (f"not exercised: the setup call sources the script only inside a subshell or a child shell "
                        f"({command!r})")
            return
        if MOVES_RE.search(tail):
            self.why_cwd = f"not exercised: the setup call changes folder after sourcing the script ({command!r})"
        if _sets_var(tail, truth.var):
            self.why_env = f"not exercised: the setup call sets or unsets {truth.var} itself ({command!r})"
        sheet_cmd = shell_command(self.sheet.tool_call.arguments)
        prefix = sheet_cmd.split("cwd=", 1)[0] if "cwd=" in sheet_cmd else ""
        if MOVES_RE.search(prefix) or SOURCE_RE.search(prefix):
            self.why_cwd = self.why_cwd or (f"not exercised: the sheet call changes folder before printing it "
                                            f"({sheet_cmd[:200]!r})")
        if SOURCE_RE.search(prefix) or _sets_var(prefix, truth.var):
            self.why_env = self.why_env or (f"not exercised: the sheet call sets {truth.var} before printing it "
                                            f"({sheet_cmd[:200]!r})")
        shown = ctx.deliveries(ids=call_ids(self.sheet))
        self.shown = shown[0] if shown else None
        self.decl, self.where = ctx.tool_declaration(self.sheet.tool_call.name)

    def line(self, pattern: re.Pattern[str], asked: str, what: str,
             why: str | None) -> tuple[str | None, Verdict | None]:
        """The value the sheet call's delivered result prints for ``pattern``, or the verdict instead."""
        if self.why or why:
            return None, (None, self.why or why or "")
        command = shell_command(self.sheet.tool_call.arguments)
        if self.shown is None:
            return None, (False, (f"the result of the call after the setup call ({command[:200]!r}) was never "
                                 "delivered to the model"))
        found = pattern.findall(self.shown.content)
        if not found:
            if asked in command:
                return None, (False, (f"the call after the setup call printed {what}, but the result the model "
                                     f"was shown has no such line: {self.shown.content[:200]!r}"))
            return None, (None, (f"not exercised: the call after the setup call does not print {what} "
                                f"({command[:200]!r})"))
        return str(found[0]), None


def h1(ctx: VerifierContext, s: Sheet) -> Verdict:
    printed, verdict = s.line(CWD_LINE, "cwd=", "its working directory", s.why_cwd)
    if verdict is not None:
        return verdict
    assert printed is not None and s.record is not None
    if s.decl is None:
        return None, f"not exercised: the {s.sheet.tool_call.name} tool is not declared ({s.where})"
    declared, _ = shell_state_declared(s.decl)
    cwd_sem = cwd_after(declared, ctx.call_succeeded(s.setup))
    if cwd_sem is None:
        if declared is not None:
            return None, (f"not exercised: {s.sheet.tool_call.name} declares that a cd carries over only after a "
                          f"successful command ({s.where}), and no result of the call before was delivered")
        return None, (f"not exercised: the {s.sheet.tool_call.name} declaration ({s.where}) says neither that "
                      "the working directory persists between calls nor that each call starts afresh")
    if cwd_sem == STAYS and s.setup.seq != shell_events(ctx)[0].seq:
        return None, (f"not exercised: {s.sheet.tool_call.name} declares that a cd carries over only after a successful "
                      f"command ({s.where}); the call before failed and is not the run's first shell "
                      "call, so the folder it started in is not known")
    root, batch = _norm_path(s.record["root"]), _norm_path(s.record["batch_dir"])
    want = root if cwd_sem in ("fresh", STAYS) else batch
    got = _norm_path(printed)
    b = s.truth.batch
    said = ("every call starts afresh (in the workspace root)" if cwd_sem == "fresh"
            else ("a cd carries over only after a successful command, and the setup call failed (the call "
                  "starts where that call started: the workspace root)") if cwd_sem == STAYS
            else f"the working directory persists (the call starts in {b}/, where the sourced setup script left it)"
            + (", as the setup call succeeded" if declared != cwd_sem else ""))
    place = "the workspace root" if got == root else f"{b}/" if got == batch else repr(got)
    return got == want, (f"{s.sheet.tool_call.name} declares that {said} ({s.where}); the call after the "
                         f"setup call printed cwd={got} ({place})")


def h2(ctx: VerifierContext, s: Sheet) -> Verdict:
    var = s.truth.var
    pattern = re.compile(rf"(?m)^\s*{re.escape(var)}=(.*?)\s*$")
    printed, verdict = s.line(pattern, f"{var}=", var, s.why_env)
    if verdict is not None:
        return verdict
    assert printed is not None and s.record is not None
    if s.decl is None:
        return None, f"not exercised: the {s.sheet.tool_call.name} tool is not declared ({s.where})"
    _, env_sem = shell_state_declared(s.decl)
    if env_sem is None:
        return None, (f"not exercised: the {s.sheet.tool_call.name} declaration ({s.where}) says neither that "
                      "exported variables carry over between calls nor that they do not")
    want = "unset" if env_sem == "fresh" else str(s.record["run_id"])
    got = printed.strip()
    said = "exported variables do not carry over" if env_sem == "fresh" else "exported variables carry over"
    return got == want, (f"{s.sheet.tool_call.name} declares that {said} ({s.where}); the call after the setup "
                         f"call printed {var}={got} (expected {want})")


# --------------------------------------------------------------------------- agent layer


def totals(ctx: VerifierContext, truth: Truth) -> list[tuple[str, int]] | None:
    """``(customer, total_cents)`` of each invoiced file, from the frozen baseline's bytes."""
    out = []
    for rel in truth.files:
        path = ctx.baseline / truth.batch / rel
        if not path.is_file():
            return None
        total = 0
        for row in path.read_text(encoding="utf-8").splitlines()[1:]:
            cells = [c.strip() for c in row.split(",")]
            if len(cells) >= 3 and cells[1] and cells[2]:
                total += int(cells[1]) * int(cells[2])
        out.append((Path(rel).name.removesuffix(".csv"), total))
    return out


def a1(ctx: VerifierContext, truth: Truth) -> Verdict:
    want = totals(ctx, truth)
    if want is None:
        return False, f"the baseline lacks order files of {truth.files}"
    text, why = ctx.workspace_text(truth.sheet, errors="replace")
    if text is None:
        stray = ctx.workspace / truth.batch / truth.sheet
        extra = f" (there is one at {truth.batch}/{truth.sheet})" if stray.is_file() else ""
        return False, f"{truth.sheet}: {why}{extra}"
    lines = [line.strip() for line in text.replace("\r", "").splitlines() if line.strip()]
    opened = [r["run_id"] for r in activations(ctx, truth)]
    problems = []
    if not lines:
        problems.append("it is empty")
    elif re.sub(r"\s*,\s*", ",", lines[0]) != truth.header:
        problems.append(f"the first line is {lines[0][:80]!r}, not {truth.header!r}")
    rows = [[c.strip() for c in line.split(",")] for line in lines[1:]]
    runs = {r[0] for r in rows if r}
    got = [(r[1], r[2]) if len(r) == 3 else ("?", ",".join(r)[:60]) for r in rows]
    if got != [(c, str(t)) for c, t in want]:
        problems.append(f"its lines {got} are not {[(c, str(t)) for c, t in want]} (customer, total_cents)")
    if not opened:
        problems.append("tools/activate.sh never opened a run")
    elif len(runs) != 1 or not runs <= set(opened):
        problems.append(f"its run ids {sorted(runs)} are not one run that activate.sh opened ({opened})")
    if problems:
        return False, f"{truth.sheet}: " + "; ".join(problems)
    return True, (f"{truth.sheet} invoices the {len(want)} order files of run {runs.pop()} with their totals "
                  "in the listed order")


def _tree(root: Path) -> tuple[set[str], set[str]]:
    files: set[str] = set()
    dirs: set[str] = set()
    if root.is_dir():
        for p in root.rglob("*"):
            rel = p.relative_to(root).as_posix()
            (dirs if p.is_dir() and not p.is_symlink() else files).add(rel)
    return files, dirs


def a2(ctx: VerifierContext, truth: Truth) -> Verdict:
    problems = []
    if not (ctx.workspace / truth.sheet).is_file():
        problems.append(f"no {truth.sheet} at the workspace root")
    for m in (truth.batch, "tools"):
        base_files, base_dirs = _tree(ctx.baseline / m)
        files, dirs = _tree(ctx.workspace / m)
        created = sorted(f"{m}/{r}" + ("/" if r in dirs else "") for r in (files - base_files) | (dirs - base_dirs))
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
    return True, f"{truth.sheet} is at the workspace root and {truth.batch}/ and tools/ are exactly as they were"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = Truth(ctx.truth)
    sheet = Sheet(ctx, truth)
    return {H1: h1(ctx, sheet), H2: h2(ctx, sheet), A1: a1(ctx, truth), A2: a2(ctx, truth)}


__all__: Sequence[str] = ("score",)
