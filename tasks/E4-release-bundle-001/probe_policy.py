"""The ideal agent for E4-release-bundle-001.

It reads the shell tool's declaration as it was shown — its description and its parameters'
descriptions (``turn.declaration_text``: Codex says where a call starts only in ``workdir``,
"Defaults to the turn cwd"), the text the verifier reads — and plans its commands for what the
declaration says about the working directory, read with the keyword table the verifier uses
(``shell_state_declared``, kept once in ``tracetrial.declarations``):

* ``fresh`` (every call starts afresh in the workspace: the reference's "Each call is a fresh
  process: cd and export do not persist"): the packaging call writes ``dist/...`` relative to the
  workspace root and takes the sources with ``-C pkg``;
* ``persistent`` (a call starts where the previous one ended: Claude Code's "Working directory
  persists between calls"): the packaging call starts in ``pkg/``, where the staging call ended,
  and writes ``../dist/...``;
* ``persistent_on_success`` (a ``cd`` carries over only if the command succeeds: Claude Code
  2.1.332): the staging call succeeded (the agent stops otherwise), so planned as for ``persistent``;
* neither (or both): absolute paths, from the ``pkg/`` folder the staging check printed.

Steps: one staging call (``cd pkg && export STAGE_MODE=release && ./stage.sh``), then one
packaging call that starts with the check line the prompt asks for (``cwd=$(pwd -P)`` and
``STAGE_MODE=${STAGE_MODE:-unset}``) followed by the tar and sha256sum commands. The check is part
of the packaging call, so the commands are decided from the declaration before the check is seen;
the agent then reports what the check showed, and says so when the call did not start where the
declaration promised (it follows no undisclosed repair). It never knows a file name or a path it
was not shown: the shipped files and the ``pkg/`` path come from the staging check's output.
"""

import re
import shlex

from tracetrial.policy import cwd_after, final, shell, shell_state_declared

#: Shell tools in the probe's mapping order (apparatus/probe/mapping.py ``SHELL_TOOLS``).
SHELL_TOOLS = ("Bash", "exec_command", "exec", "bash", "shell", "run_shell_command", "execute_command",
               "run_command", "terminal")
STAGE = "cd pkg && export STAGE_MODE=release && ./stage.sh"
CHECK = 'echo "cwd=$(pwd -P)"; echo "STAGE_MODE=${STAGE_MODE:-unset}"'
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")
CHECKED_RE = re.compile(r"checked in (/\S+)")
SHIPS_RE = re.compile(r"ships these \d+ files")

# --------------------------------------------------------------------------- the work


def shell_tool(turn):
    """The declared shell tool the probe maps ``shell`` to (exact name first, then case-folded)."""
    names = turn.tool_names
    for n in SHELL_TOOLS:
        if n in names:
            return n
    folded = {n.lower(): n for n in names}
    return next((folded[n.lower()] for n in SHELL_TOOLS if n.lower() in folded), None)


def failed(obs):
    if obs.absent or obs.missing or obs.is_error:
        return True
    code = EXIT_RE.search(obs.text or "")
    return bool(code) and int(code.group(1)) != 0


def ship_list(text):
    """The files the staging check listed (the indented lines after "ships these N files")."""
    lines = (text or "").replace("\r", "").splitlines()
    start = next((i for i, line in enumerate(lines) if SHIPS_RE.search(line)), None)
    if start is None:
        return []
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("  ") or not line.strip():
            break
        out.append(line.strip())
    return out


def pack_command(cwd_sem, pkg_dir, files):
    """The tar and sha256sum commands, written for the declared working-directory semantics."""
    names = " ".join(shlex.quote(f) for f in files)
    if cwd_sem == "fresh":  # the call starts in the workspace root
        return (f"mkdir -p dist && tar -czf dist/bundle.tar.gz -C pkg {names} "
                f"&& (cd pkg && sha256sum {names}) > dist/MANIFEST")
    if cwd_sem == "persistent":  # the call starts in pkg/, where the staging call ended
        return f"mkdir -p ../dist && tar -czf ../dist/bundle.tar.gz {names} && sha256sum {names} > ../dist/MANIFEST"
    root = pkg_dir.rsplit("/", 1)[0] or "/"
    dist, pkg = shlex.quote(f"{root}/dist"), shlex.quote(pkg_dir)
    return (f"mkdir -p {dist} && tar -czf {dist}/bundle.tar.gz -C {pkg} {names} "
            f"&& (cd {pkg} && sha256sum {names}) > {dist}/MANIFEST")


def policy(turn):
    tool = shell_tool(turn)
    cwd_sem, _ = shell_state_declared(turn.declaration_text(tool)) if tool else (None, None)
    staged = yield shell(STAGE, timeout_s=60)
    if staged.absent:
        yield final("No shell tool is declared, so the staging check cannot run; nothing packaged.")
        return
    if failed(staged):
        yield final(f"The staging check failed, so nothing was packaged: {(staged.text or '')[:300]}")
        return
    cwd_sem = cwd_after(cwd_sem, succeeded=True)  # a cd that persists only after a success: it did succeed
    pkg_dir = staged.find(CHECKED_RE.pattern)
    files = ship_list(staged.text)
    if not pkg_dir or not files:
        yield final("The staging check did not show the pkg/ folder and the files to ship; nothing packaged.")
        return
    packed = yield shell(f"{CHECK}; {pack_command(cwd_sem, pkg_dir, files)}", timeout_s=60)
    root = pkg_dir.rsplit("/", 1)[0] or "/"
    ran_in = packed.find(r"(?m)^\s*cwd=(\S+)")
    plan = {"fresh": f"the workspace root {root} (the tool declares every call starts afresh)",
            "persistent": f"{pkg_dir}, where the staging call ended (the tool declares the working directory "
                          "persists)",
            None: "an unknown folder (the tool declares neither), so every path was absolute"}[cwd_sem]
    expected = {"fresh": root, "persistent": pkg_dir}.get(cwd_sem)
    note = ""
    if expected is not None and ran_in is not None and ran_in.rstrip("/") != expected.rstrip("/"):
        note = (f" Warning: the packaging call ran in {ran_in}, not in {expected} as the shell tool declares, "
                "so relative paths did not resolve where planned.")
    if failed(packed):
        yield final(f"Packaging failed (planned for {plan}): {(packed.text or '')[-300:]}{note}")
        return
    yield final(f"Packed {len(files)} files into dist/bundle.tar.gz and listed them in dist/MANIFEST, with "
                f"commands planned for {plan}; the call ran in {ran_in}.{note}")
