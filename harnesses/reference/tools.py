"""Built-in tools of the reference harness: shell, read_file, write_file, edit_file.

Every result is honest (the faithful behaviour; a mutant flips exactly one rule):

* ``shell`` runs ``bash -c <command>`` in a fresh process group in the workspace
  (no state persists between calls). The result text starts with ``Exit code N``
  and the record carries ``exit_code``; stderr is kept under a ``[stderr]``
  label; a timeout kills the whole process group and says ``timed out after N s``.
* Output over :data:`OUTPUT_LIMIT` bytes per stream is cut at a UTF-8 boundary;
  the full stream is saved under ``<workspace>/.tt-outputs/`` and a notice gives
  the bytes shown, the bytes omitted and the saved path.
* Deny rules (the task's ``permissions.deny``) refuse a call before it runs.
* ``shell`` with ``tty`` (only when the task lists ``tty``) runs the command on a new
  pseudo-terminal, its controlling terminal. A command blocked reading that terminal (``read``
  on the pty or on ``/dev/tty``, seen in ``/proc/<pid>/syscall``) with no output for
  :data:`INPUT_WAIT_S` is ended and reported as waiting for input, with what it printed.
* The task's OS-level policy (:class:`Confinement`: ``permissions.protect``, ``network: deny``)
  confines every command - shell call, terminal command, background job - in a user + mount
  (+ network) namespace: protected paths are bound read-only, whatever the command's form
  (a script, a glob, a link, a redirection), and a denied network leaves the command only its own
  loopback. The file tools refuse protected paths. A result that ran into the policy ends with a
  ``[policy]`` line.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesses.runner import kill_group

#: Bytes of one output stream shown to the model before it is truncated.
OUTPUT_LIMIT = 16 * 1024
#: Bytes of a file shown by ``read_file`` before it is truncated.
READ_LIMIT = 256 * 1024
#: Folder (inside the workspace) where full outputs of truncated commands are saved.
OUTPUTS_DIR = ".tt-outputs"
DEFAULT_SHELL_TIMEOUT_S = 120.0
MAX_SHELL_TIMEOUT_S = 3600.0
#: Seconds a terminal command may sit blocked reading its terminal, printing nothing, before the
#: shell ends it (a quiet command that is not reading its terminal is left alone).
INPUT_WAIT_S = 5.0


@dataclass
class ToolOutcome:
    """A tool's model-facing result plus the structured fields the native record keeps."""

    content: str
    is_error: bool = False
    status: str = "ok"
    exit_code: int | None = None
    duration_s: float | None = None
    truncated: bool | None = None
    omitted_bytes: int | None = None
    saved_paths: list[str] = field(default_factory=list)
    structured_content: Any = None
    policy_hits: list[tuple[str, str]] = field(default_factory=list)
    """How the command ran into the task's OS-level policy: ``(policy_kind, reason)`` each, shown as
    ``[policy]`` lines and written as ``policy`` records (not in the tool result record)."""

    def record(self) -> dict[str, Any]:
        return {"content": self.content, "is_error": self.is_error, "status": self.status,
                "exit_code": self.exit_code, "duration_s": self.duration_s, "truncated": self.truncated,
                "omitted_bytes": self.omitted_bytes, "saved_paths": self.saved_paths,
                "structured_content": self.structured_content}


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


#: Chat Completions declarations of the built-in tools.
BUILTIN_TOOLS: dict[str, dict[str, Any]] = {
    "shell": _fn(
        "shell",
        "Run a command with bash in the workspace. Each call is a fresh process: cd and export do not "
        "persist; background processes it starts run until the end of the turn. The result starts with "
        "'Exit code N'; stderr follows a '[stderr]' line. Output over "
        f"{OUTPUT_LIMIT} bytes per stream is truncated and saved to a file named in the notice.",
        {"command": {"type": "string", "description": "The bash command line."},
         "timeout_s": {"type": "number", "description": f"Kill the command after this many seconds "
                       f"(default {DEFAULT_SHELL_TIMEOUT_S:g}, max {MAX_SHELL_TIMEOUT_S:g})."}},
        ["command"]),
    "read_file": _fn(
        "read_file",
        f"Read a text file (path relative to the workspace or absolute). Over {READ_LIMIT} bytes the "
        "result is truncated with a notice; use offset/limit (lines) to read a part.",
        {"path": {"type": "string"},
         "offset": {"type": "integer", "description": "First line to return (1-based)."},
         "limit": {"type": "integer", "description": "Number of lines to return."}},
        ["path"]),
    "write_file": _fn(
        "write_file", "Write a whole file (parent folders are created).",
        {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    "edit_file": _fn(
        "edit_file", "Replace old_string by new_string in a file; old_string must occur exactly once "
        "unless replace_all is true.",
        {"path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"},
         "replace_all": {"type": "boolean"}},
        ["path", "old_string", "new_string"]),
}


#: The ``tty`` property the shell declaration gains when the task lists ``tty``.
TTY_PROPERTY: dict[str, Any] = {"type": "boolean", "description": (
    "Run the command on a pseudo-terminal (default false). A command waiting for input on its terminal "
    f"with no output for {INPUT_WAIT_S:g} s is ended and reported, with what it printed.")}


def with_tty(decl: dict[str, Any]) -> dict[str, Any]:
    """``decl`` (a shell declaration) with the :data:`TTY_PROPERTY` option."""
    fn = dict(decl["function"])
    params = dict(fn["parameters"])
    params["properties"] = {**params["properties"], "tty": TTY_PROPERTY}
    fn["parameters"] = params
    return {**decl, "function": fn}


def with_policy(decl: dict[str, Any], confine: Confinement) -> dict[str, Any]:
    """``decl`` (a shell declaration) with the task's command policy stated in its description."""
    fn = {**decl["function"], "description": decl["function"]["description"] + " " + confine.describe()}
    return {**decl, "function": fn}


#: The shell declaration when the task needs background jobs (``--background-jobs``): the same
#: tool with ``run_in_background``, plus :data:`JOB_STATUS_TOOL`. Without background jobs the
#: declarations above are sent unchanged.
SHELL_WITH_JOBS = _fn(
    "shell",
    "Run a command with bash in the workspace. Each call is a fresh process: cd and export do not "
    "persist; background processes it starts run until the end of the turn. The result starts with "
    "'Exit code N'; stderr follows a '[stderr]' line. Output over "
    f"{OUTPUT_LIMIT} bytes per stream is truncated and saved to a file named in the notice. "
    "run_in_background=true starts the command as a background job and returns its job id at once; "
    "job_status reports whether it is still running and, once it has ended, its exit code and output "
    "(a job still running at the end of the turn is killed).",
    {"command": {"type": "string", "description": "The bash command line."},
     "timeout_s": {"type": "number", "description": f"Kill the command after this many seconds "
                   f"(default {DEFAULT_SHELL_TIMEOUT_S:g}, max {MAX_SHELL_TIMEOUT_S:g}; not for background jobs)."},
     "run_in_background": {"type": "boolean", "description": "Start as a background job (default false)."}},
    ["command"])
JOB_STATUS_TOOL = _fn(
    "job_status",
    "State of background jobs started with shell run_in_background: running, or ended with its exit code "
    "and its output (stdout, then stderr after a '[stderr]' line). wait_s waits up to that many seconds "
    "for the job(s) to end.",
    {"job_id": {"type": "string", "description": "One job (default: every job of this turn)."},
     "wait_s": {"type": "number", "description": "Seconds to wait for the job(s) to end (default 0)."}},
    [])


#: Folder (inside the workspace) of the workspace's skills: ``skills/<name>/SKILL.md``.
SKILLS_DIR = "skills"
#: Bytes of a skill's body the ``truncate_skill`` defect relays.
TRUNCATED_SKILL_BYTES = 1024
SKILL_TOOL = _fn(
    "skill",
    "Load one of this workspace's skills (listed in the system prompt) by name: returns its "
    "instructions and data (SKILL.md without its front matter) and lists the skill's other files.",
    {"name": {"type": "string", "description": "The skill's name as the system prompt lists it."}},
    ["name"])


# ----------------------------------------------------------------------------- deny rules

_SEGMENT_RE = re.compile(r"\s*(?:&&|\|\||;|\||\n)\s*")
_CLAUDE_STYLE = re.compile(r"^(?P<tool>[A-Za-z_][\w]*)\((?P<glob>.*)\)$")
_TOOL_ALIASES = {"bash": "shell", "Bash": "shell", "exec": "shell", "Read": "read_file",
                 "Write": "write_file", "Edit": "edit_file"}
_TOOL_PREFIX = re.compile(r"^(?P<tool>shell|read_file|write_file|edit_file|ask_user|spawn_subagent|"
                          r"mcp__[\w*-]+|bash|Bash|exec|Read|Write|Edit):(?P<glob>.*)$")
#: Wrappers that run the command after them (``sudo rm x`` is an ``rm``).
_WRAPPERS = frozenset({"sudo", "env", "command", "exec", "nohup", "time", "nice", "builtin"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")


def _command_words(segment: str) -> list[str]:
    """The words of one shell segment with wrappers and ``VAR=x`` prefixes removed and the
    program reduced to its basename (``/bin/rm -f x`` -> ``['rm', '-f', 'x']``)."""
    try:
        words = shlex.split(segment)
    except ValueError:
        words = segment.split()
    while words and (words[0] in _WRAPPERS or _ASSIGNMENT.match(words[0]) or
                     (words[0].startswith("-") and len(words) > 1)):
        words = words[1:]
    if words:
        words[0] = words[0].rsplit("/", 1)[-1]
    return words


@dataclass(frozen=True)
class DenyRule:
    """A deny rule of the task's permission policy.

    Forms: ``<command prefix>`` (no wildcard: ``rm`` denies every ``rm …``, also ``/bin/rm``,
    ``sudo rm`` and ``rm`` after ``&&``/``;``/``|``), a glob (``git push*``: matched against the
    whole command and each segment), Claude-style ``Bash(rm:*)`` / ``rm:*`` (a prefix), or
    ``<tool>:<glob>`` for another tool (``write_file:secrets/*`` against the path; other tools
    against their JSON arguments).
    """

    text: str
    tool: str
    glob: str

    @classmethod
    def parse(cls, text: str) -> DenyRule:
        raw = text.strip()
        m = _CLAUDE_STYLE.match(raw) or _TOOL_PREFIX.match(raw)
        tool, glob = (m["tool"], m["glob"]) if m else ("shell", raw)
        glob = glob.strip().removesuffix(":*")  # Claude's prefix syntax ``rm:*``
        return cls(text, _TOOL_ALIASES.get(tool, tool), glob or "*")

    @property
    def is_prefix(self) -> bool:
        return self.tool == "shell" and not any(c in self.glob for c in "*?[")

    def matches(self, tool: str, subject: str, *, literal: bool = False) -> bool:
        """``literal``: the ``literal_deny_match`` defect - a shell rule is compared with the command
        text as written only (its leading words, or the glob against the whole text): no program
        basename, no wrapper or ``VAR=x`` stripping, no segments of a compound command."""
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if tool != "shell":
            return fnmatch.fnmatchcase(subject.strip(), self.glob)
        if literal:
            if self.is_prefix:
                want = self.glob.split()
                return subject.split()[: len(want)] == want
            return fnmatch.fnmatchcase(subject.strip(), self.glob)
        segments = [s for s in _SEGMENT_RE.split(subject) if s.strip()]
        if self.is_prefix:
            want = _command_words(self.glob)
            return any(_command_words(seg)[: len(want)] == want for seg in segments)
        candidates = [subject.strip(), *segments, *(" ".join(_command_words(s)) for s in segments)]
        return any(fnmatch.fnmatchcase(c, self.glob) for c in candidates)


def deny_subject(tool: str, arguments: Mapping[str, Any]) -> str:
    if tool == "shell":
        return str(arguments.get("command", ""))
    if tool in ("read_file", "write_file", "edit_file"):
        return str(arguments.get("path", ""))
    return json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False)


def find_denial(rules: list[DenyRule], tool: str, arguments: Mapping[str, Any], *,
                literal: bool = False) -> DenyRule | None:
    subject = deny_subject(tool, arguments)
    return next((r for r in rules if r.matches(tool, subject, literal=literal)), None)


# ----------------------------------------------------------------------------- confinement

#: What a failing write/delete under a read-only bind mount prints (EROFS), and what a command
#: without network prints; a result containing one of them gets a ``[policy]`` line.
_PROTECTED_ERRORS = ("Read-only file system", "Device or resource busy")
_NO_NETWORK = ("Network is unreachable", "Temporary failure in name resolution", "Could not resolve host",
               "Name or service not known", "Couldn't connect to server", "Connection refused",
               "Failed to establish a new connection", "Cannot assign requested address")
#: Words of a command the ``unguarded_cleanup`` text guard takes for destructive.
_DESTRUCTIVE = frozenset({"rm", "rmdir", "mv", "truncate", "shred", "unlink", "dd"})


@dataclass(frozen=True)
class Confinement:
    """The task's OS-level command policy: ``protect`` (workspace-relative paths no command may
    change) and ``no_network`` (commands get no network).

    ``text_guard`` is the ``unguarded_cleanup`` defect: protected paths are not bound read-only;
    a command is refused only when its text looks destructive and names a protected path.
    ``keep_network`` is the ``ignore_network_policy`` defect: commands keep the network (the tool
    still says they have none)."""

    workspace: Path
    protect: tuple[str, ...] = ()
    no_network: bool = False
    text_guard: bool = False
    keep_network: bool = False

    @property
    def active(self) -> bool:
        return bool(self.protect) or self.no_network

    def protected_paths(self) -> list[Path]:
        """The protected paths as they are on disk now (links resolved; missing ones left out)."""
        out = []
        for rel in self.protect:
            path = self.workspace / rel
            if path.exists():
                out.append(path.resolve())
        return out

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespaces: each protected path bound onto itself read-only,
        then ``exec`` of the command (a bind that fails refuses the command: exit 125)."""
        binds = [] if self.text_guard else self.protected_paths()
        net = self.no_network and not self.keep_network
        if not binds and not net:
            return argv
        script = "".join(f"mount --bind {shlex.quote(str(p))} {shlex.quote(str(p))} && "
                         f"mount -o remount,bind,ro {shlex.quote(str(p))} {shlex.quote(str(p))} || "
                         f"{{ echo 'policy: cannot protect {p}' >&2; exit 125; }}\n" for p in binds)
        return ["unshare", "--user", "--map-root-user", "--mount", *(["--net"] if net else []), "--",
                "bash", "-c", script + 'exec "$@"', "tt-confine", *argv]

    def describe(self) -> str:
        """The sentence the shell declaration gains (the policy as the model is told it)."""
        parts = []
        if self.protect:
            parts.append("These paths are protected: no command can change or delete them (read-only): "
                         + ", ".join(self.protect) + ".")
        if self.no_network:
            parts.append("Commands have no network access.")
        return " ".join(parts)

    def refused_by_guard(self, command: str) -> str | None:
        """The ``unguarded_cleanup`` guard: the protected path a destructive-looking command names."""
        if not self.text_guard:
            return None
        words = [w for seg in _SEGMENT_RE.split(command) for w in _command_words(seg)]
        if not (_DESTRUCTIVE & set(words) or re.search(r"(^|[^>])>(?!>)|>\|", command)):
            return None
        for rel in self.protect:
            name = rel.rstrip("/")
            if any(w.rstrip("/") == name or w.startswith((name + "/", "./" + name)) for w in words) or re.search(r">\|?\s*(\./)?" + re.escape(name) + r"(/|\s|$)", command):
                return rel
        return None

    def file_refusal(self, path: Path) -> str | None:
        """The protected path a file tool's target lies in (compared by real path), else ``None``."""
        try:
            target = path.resolve()
        except OSError:
            return None
        for rel in self.protect:
            root = self.workspace / rel
            if root.exists() and (target == root.resolve() or root.resolve() in target.parents):
                return rel
        return None

    def notice(self, output: str) -> list[tuple[str, str]]:
        """``(policy_kind, line)`` for each way a command's output shows it ran into the policy: a
        write or delete refused under a protected path (EROFS; EBUSY for removing a protected path
        itself, a mount point), a connection attempt without network."""
        hits = []
        if self.protect and not self.text_guard and any(m in output for m in _PROTECTED_ERRORS):
            hits.append(("protected_path", "a change to a protected path was refused (read-only: "
                         + ", ".join(self.protect) + ")"))
        if self.no_network and any(marker in output for marker in _NO_NETWORK):
            hits.append(("sandbox", "commands have no network access in this task"))
        return hits


# ----------------------------------------------------------------------------- truncation


@dataclass
class Limited:
    text: str
    truncated: bool | None = None
    omitted: int | None = None
    saved: str | None = None


def _utf8_cut(data: bytes, limit: int) -> int:
    cut = limit
    while cut > 0 and cut < len(data) and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return cut


def limit_output(data: bytes, *, label: str, limit: int, save_to: Path | None, mutant: str | None,
                 recovery: str | None = None) -> Limited:
    """Cut ``data`` to ``limit`` bytes with an accurate notice (or the mutant's version of it).

    ``save_to``: where the full data is saved (``None``: nothing is saved and ``recovery``
    tells the model how to read the rest).
    """
    if len(data) <= limit:
        return Limited(data.decode("utf-8", errors="replace"))
    cut = _utf8_cut(data, limit)
    shown = data[:cut].decode("utf-8", errors="replace")
    if mutant == "truncate_silently":
        return Limited(shown)
    omitted = len(data) - cut
    reported = omitted // 2 if mutant == "misreport_omitted" else omitted
    saved: str | None = None
    if save_to is not None:
        save_to.parent.mkdir(parents=True, exist_ok=True)
        save_to.write_bytes(data)
        saved = str(save_to)
    where = f" Full {label} saved to {saved}" if saved else (f" {recovery}" if recovery else "")
    sep = "" if shown.endswith("\n") else "\n"
    notice = (f"{sep}[{label} truncated: showing the first {cut} of {cut + reported} bytes; "
              f"{reported} bytes omitted.{where}]")
    return Limited(shown + notice, True, reported, saved)


# ----------------------------------------------------------------------------- shell


#: Process groups of commands whose background children may still run (ended at turn end).
_GROUPS: set[int] = set()


def end_background_processes() -> int:
    """Kill what commands left running in the background; returns how many groups were alive."""
    alive = 0
    for pgid in sorted(_GROUPS):
        try:
            os.killpg(pgid, signal.SIGKILL)
            alive += 1
        except (ProcessLookupError, PermissionError):
            pass
    _GROUPS.clear()
    return alive


def _safe_name(call_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", call_id)[:80] or "call"


@dataclass
class ShellState:
    """The ``persist_shell_cwd`` defect's memory: the folder the previous command ended in."""

    cwd: Path | None = None


def run_shell(command: str, *, cwd: Path, env: Mapping[str, str], timeout_s: float, call_id: str,
              mutant: str | None, state: ShellState | None = None,
              confine: Confinement | None = None) -> ToolOutcome:
    """Run one command; blocking (the agent loop runs it in a worker thread).

    ``state`` (only with ``persist_shell_cwd``): the command starts in the folder the previous one
    ended in, and the folder this one ends in is kept - although the tool declares every call a
    fresh process in the workspace."""
    started = time.monotonic()
    argv, start_in, cwd_file = ["bash", "-c", command], cwd, None
    if state is not None:
        start_in = state.cwd if state.cwd is not None and state.cwd.is_dir() else cwd
        fd, name = tempfile.mkstemp(prefix="tt-cwd-")
        os.close(fd)
        cwd_file = Path(name)
        trap = shlex.quote(f"pwd -P >| {shlex.quote(name)}")
        argv = ["bash", "-c", f"trap {trap} EXIT\n{command}"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                confine.wrap(argv) if confine else argv, cwd=start_in, env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.DEVNULL if mutant == "drop_stderr" else err, start_new_session=True)
        except OSError as exc:
            if cwd_file is not None:
                cwd_file.unlink(missing_ok=True)
            return ToolOutcome(f"Could not start the command: {exc}", is_error=True, status="error",
                               duration_s=round(time.monotonic() - started, 3))
        _GROUPS.add(proc.pid)  # ended at turn end (background children, or a call still running then)
        timed_out = False
        try:
            rc = proc.wait() if mutant == "ignore_timeout" else proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc, grace_s=1.0)
            rc = proc.returncode
        duration = round(time.monotonic() - started, 3)
        if state is not None and cwd_file is not None:
            ended_in = cwd_file.read_text(encoding="utf-8", errors="replace").strip()
            cwd_file.unlink(missing_ok=True)
            if ended_in:
                state.cwd = Path(ended_in)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    saved_dir = cwd / OUTPUTS_DIR
    name = _safe_name(call_id)
    so = limit_output(stdout, label="stdout", limit=OUTPUT_LIMIT, save_to=saved_dir / f"{name}.stdout.txt",
                      mutant=mutant)
    se = limit_output(stderr, label="stderr", limit=OUTPUT_LIMIT, save_to=saved_dir / f"{name}.stderr.txt",
                      mutant=mutant)
    body = so.text
    if se.text:
        body += ("" if not body or body.endswith("\n") else "\n") + "[stderr]\n" + se.text
    if not body:
        body = "(no output)"
    parts = [p for p in (so, se) if p.truncated]
    trunc: dict[str, Any] = {"truncated": True if parts else None,
                             "omitted_bytes": sum(p.omitted or 0 for p in parts) if parts else None,
                             "saved_paths": [p.saved for p in parts if p.saved]}
    hits = confine.notice(stderr.decode("utf-8", errors="replace")) if confine else []
    if hits:
        body += ("" if body.endswith("\n") else "\n") + "\n".join(f"[policy] {why}" for _, why in hits)
        trunc["policy_hits"] = hits
    if timed_out:
        head = f"Command timed out after {timeout_s:g} s and was killed (process group terminated); no exit status."
        return ToolOutcome(f"{head}\n{body}", is_error=True, status="timed_out", exit_code=None,
                           duration_s=duration, **trunc)
    code = 128 - rc if rc < 0 else rc
    if mutant == "hide_exit_code":
        return ToolOutcome(body, is_error=False, status="ok", exit_code=0, duration_s=duration, **trunc)
    head = f"Exit code {code}"
    if rc < 0:
        head += f" (killed by signal {signal.Signals(-rc).name})"
    return ToolOutcome(f"{head}\n{body}", is_error=code != 0, status="ok" if code == 0 else "error",
                       exit_code=code, duration_s=duration, **trunc)


# ----------------------------------------------------------------------------- terminal commands

#: ``read`` on x86_64 and on aarch64 (``/proc/<pid>/syscall`` gives the number the process is blocked in).
_READ_SYSCALLS = {"x86_64": 0, "aarch64": 63}


def _session_pids(sid: int) -> list[int]:
    """Processes of session ``sid`` (the terminal command's own session)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 3 and fields[3] == str(sid):
            out.append(int(entry.name))
    return out


def reading_terminal(pid: int, pty_path: str, pty_rdev: int) -> bool:
    """``pid`` is blocked in ``read`` on the terminal: on ``pty_path`` itself, or on ``/dev/tty``
    while the pty is its controlling terminal (a password prompt reads ``/dev/tty``)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text(encoding="ascii").split()
        if not fields or fields[0] != str(_READ_SYSCALLS.get(os.uname().machine, 0)) or len(fields) < 2:
            return False
        target = os.readlink(f"/proc/{pid}/fd/{int(fields[1], 16)}")
        if target == pty_path:
            return True
        if target != "/dev/tty":
            return False
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return int(stat[stat.rfind(")") + 2:].split()[4]) == pty_rdev
    except (OSError, ValueError, IndexError):
        return False


def run_shell_tty(command: str, *, cwd: Path, env: Mapping[str, str], timeout_s: float, call_id: str,
                  mutant: str | None, confine: Confinement | None = None) -> ToolOutcome:
    """Run one command on a new pseudo-terminal (stdin, stdout and stderr; its controlling terminal).

    Faithful: once every second the command's session is checked; a process blocked reading the
    terminal while nothing was printed for :data:`INPUT_WAIT_S` ends the command (its process
    group is killed) and the result says it was waiting for input. ``hang_on_input``: no check -
    the command runs until it ends or the timeout."""
    import select

    started = time.monotonic()
    master, slave = os.openpty()
    pty_path = os.ttyname(slave)
    pty_rdev = os.fstat(slave).st_rdev
    try:
        # setsid --ctty: a new session (its id is this pid: the child is not a group leader, so setsid
        # does not fork) whose controlling terminal is the pty on stdin - without a preexec_fn,
        # which is unsafe in the agent's worker threads
        argv = ["setsid", "--ctty", "bash", "-c", command]
        proc = subprocess.Popen(confine.wrap(argv) if confine else argv, cwd=cwd,
                                env={**env, "TERM": env.get("TERM", "xterm")},
                                stdin=slave, stdout=slave, stderr=slave)
    except OSError as exc:
        os.close(master)
        os.close(slave)
        return ToolOutcome(f"Could not start the command: {exc}", is_error=True, status="error",
                           duration_s=round(time.monotonic() - started, 3))
    os.close(slave)
    _GROUPS.add(proc.pid)
    output = bytearray()
    last_output, next_check = time.monotonic(), time.monotonic() + 1.0
    waiting = timed_out = False
    while True:
        now = time.monotonic()
        if now - started >= timeout_s:
            timed_out = True
            break
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                chunk = b""
            if chunk:
                output += chunk
                last_output = time.monotonic()
                continue
            if proc.poll() is not None:
                break
        if proc.poll() is not None:
            if not ready:
                break  # the command ended and nothing more is buffered (a child left running is killed)
            continue
        if mutant != "hang_on_input" and now >= next_check:
            next_check = now + 1.0
            if now - last_output >= INPUT_WAIT_S and any(
                    reading_terminal(pid, pty_path, pty_rdev) for pid in _session_pids(proc.pid)):
                waiting = True
                break
    if waiting or timed_out:
        kill_group(proc, grace_s=1.0)
    rc = proc.wait()
    try:
        while select.select([master], [], [], 0)[0]:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            output += chunk
    except OSError:
        pass
    os.close(master)
    duration = round(time.monotonic() - started, 3)
    text = bytes(output).replace(b"\r\n", b"\n")
    lim = limit_output(text, label="output", limit=OUTPUT_LIMIT,
                       save_to=cwd / OUTPUTS_DIR / f"{_safe_name(call_id)}.tty.txt", mutant=mutant)
    body = lim.text or "(no output)"
    trunc: dict[str, Any] = {"truncated": lim.truncated, "omitted_bytes": lim.omitted,
                             "saved_paths": [lim.saved] if lim.saved else []}
    hits = confine.notice(text.decode("utf-8", errors="replace")) if confine else []
    if hits:
        body += ("" if body.endswith("\n") else "\n") + "\n".join(f"[policy] {why}" for _, why in hits)
        trunc["policy_hits"] = hits
    if waiting:
        head = (f"Command was waiting for input on its terminal (no output for {INPUT_WAIT_S:g} s) and was "
                f"ended after {duration:g} s (process group terminated); no exit status. Output so far:")
        return ToolOutcome(f"{head}\n{body}", is_error=True, status="waiting_for_input", exit_code=None,
                           duration_s=duration, **trunc)
    if timed_out:
        head = f"Command timed out after {timeout_s:g} s and was killed (process group terminated); no exit status."
        return ToolOutcome(f"{head}\n{body}", is_error=True, status="timed_out", exit_code=None,
                           duration_s=duration, **trunc)
    code = 128 - rc if rc < 0 else rc
    head = f"Exit code {code}" + (f" (killed by signal {signal.Signals(-rc).name})" if rc < 0 else "")
    return ToolOutcome(f"{head}\n{body}", is_error=code != 0, status="ok" if code == 0 else "error",
                       exit_code=code, duration_s=duration, **trunc)


# ----------------------------------------------------------------------------- background jobs


@dataclass
class Job:
    """A background job of the shell tool: its process group runs until it ends or the turn ends."""

    id: str
    call_id: str
    command: str
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path
    started: float
    duration_s: float | None = None
    recorded: bool = False
    """Its end (or kill) has been written to the native log."""

    def poll(self) -> int | None:
        """The exit code (shell convention: 128+N for a signal) once the job has ended, else ``None``."""
        rc = self.proc.poll()
        if rc is None:
            return None
        if self.duration_s is None:
            self.duration_s = round(time.monotonic() - self.started, 3)
        return 128 - rc if rc < 0 else rc


def start_job(command: str, *, cwd: Path, env: Mapping[str, str], job_id: str, call_id: str,
              confine: Confinement | None = None) -> Job | ToolOutcome:
    """Start ``command`` as a background job (its streams go to files outside the workspace)."""
    folder = Path(tempfile.mkdtemp(prefix=f"tt-{job_id}-"))
    out, err = folder / "stdout", folder / "stderr"
    try:
        with out.open("wb") as fo, err.open("wb") as fe:
            argv = ["bash", "-c", command]
            proc = subprocess.Popen(confine.wrap(argv) if confine else argv, cwd=cwd, env=dict(env),
                                    stdin=subprocess.DEVNULL,
                                    stdout=fo, stderr=fe, start_new_session=True)
    except OSError as exc:
        return ToolOutcome(f"Could not start the command: {exc}", is_error=True, status="error")
    _GROUPS.add(proc.pid)  # ended at turn end if still running
    return Job(job_id, call_id, command, proc, out, err, time.monotonic())


def job_report(job: Job, *, mutant: str | None) -> tuple[str, int | None]:
    """What ``job_status`` shows of one job, and the exit code it states (``None``: still running).

    The ``hide_job_exit`` defect: an ended job is reported with exit code 0 whatever its status."""
    code = job.poll()
    so = limit_output(job.out.read_bytes(), label="stdout", limit=OUTPUT_LIMIT, save_to=None, mutant=mutant,
                      recovery=f"The whole stdout so far is in {job.out}.")
    se = limit_output(job.err.read_bytes(), label="stderr", limit=OUTPUT_LIMIT, save_to=None, mutant=mutant,
                      recovery=f"The whole stderr so far is in {job.err}.")
    body = so.text
    if se.text:
        body += ("" if not body or body.endswith("\n") else "\n") + "[stderr]\n" + se.text
    if code is None:
        head = (f"Job {job.id} is running ({time.monotonic() - job.started:.1f} s so far; no exit status yet). "
                "Output so far:")
        return f"{head}\n{body or '(no output yet)'}", None
    if mutant == "hide_job_exit":
        code = 0  # the defect: the job's real exit status is replaced by success
    return f"Job {job.id} ended after {job.duration_s:g} s. Exit code {code}\n{body or '(no output)'}", code


# ----------------------------------------------------------------------------- skills


@dataclass(frozen=True)
class Skill:
    """A workspace skill: ``skills/<folder>/SKILL.md`` with ``name``/``description`` front matter."""

    name: str
    description: str
    path: Path


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    """``key: value`` lines between a leading ``---`` and the next ``---``, and the body after them."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            meta = {}
            for entry in lines[1:i]:
                key, sep, value = entry.partition(":")
                if sep and key.strip():
                    meta[key.strip()] = value.strip().strip("\"'")
            return meta, "".join(lines[i + 1:])
    return {}, text


def find_skills(workspace: Path) -> list[Skill]:
    """The workspace's skills, by folder name (an unreadable SKILL.md is left out)."""
    out = []
    for path in sorted((workspace / SKILLS_DIR).glob("*/SKILL.md")):
        try:
            meta, _ = _front_matter(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        out.append(Skill(meta.get("name") or path.parent.name, meta.get("description", ""), path))
    return out


def load_skill(skills: list[Skill], args: Mapping[str, Any], mutant: str | None) -> ToolOutcome:
    """The ``skill`` tool: the named skill's body, whole (over :data:`READ_LIMIT` with a notice), and
    its other files. The ``truncate_skill`` defect relays only the first
    :data:`TRUNCATED_SKILL_BYTES` bytes of the body, with no notice."""
    name = str(args.get("name", ""))
    skill = next((s for s in skills if s.name == name), None)
    if skill is None:
        known = ", ".join(s.name for s in skills) or "none"
        return ToolOutcome(f"skill: no skill named {name!r} (skills: {known})", is_error=True, status="error")
    try:
        _, body = _front_matter(skill.path.read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        return ToolOutcome(f"skill: cannot read {skill.path}: {exc}", is_error=True, status="error")
    data = body.encode("utf-8")
    if mutant == "truncate_skill":
        data = data[:_utf8_cut(data, TRUNCATED_SKILL_BYTES)]  # the defect: the rest of the body is dropped
    lim = limit_output(data, label="skill", limit=READ_LIMIT, save_to=None, mutant=mutant,
                       recovery=f"Read the rest of {skill.path} with read_file (offset/limit).")
    files = sorted(str(p.relative_to(skill.path.parent)) for p in skill.path.parent.rglob("*")
                   if p.is_file() and p != skill.path)
    head = f"Skill {skill.name} ({skill.path.relative_to(skill.path.parents[2])}):"
    tail = f"\n[skill files: {', '.join(files)}]" if files else ""
    return ToolOutcome(f"{head}\n{lim.text}{tail}", truncated=lim.truncated, omitted_bytes=lim.omitted)


# ----------------------------------------------------------------------------- file tools


def resolve(workspace: Path, path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else workspace / p


def read_file(workspace: Path, args: Mapping[str, Any], mutant: str | None) -> ToolOutcome:
    path = resolve(workspace, str(args.get("path", "")))
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ToolOutcome(f"read_file: no such file: {path}", is_error=True, status="error")
    except OSError as exc:
        return ToolOutcome(f"read_file: cannot read {path}: {exc}", is_error=True, status="error")
    offset, limit = args.get("offset"), args.get("limit")
    if offset is not None or limit is not None:
        lines = data.splitlines(keepends=True)
        start = max(int(offset or 1), 1) - 1
        end = len(lines) if limit is None else start + max(int(limit), 0)
        data = b"".join(lines[start:end])
    lim = limit_output(data, label="file", limit=READ_LIMIT, save_to=None, mutant=mutant,
                       recovery=f"Read the rest of {path} with offset/limit (lines).")
    return ToolOutcome(lim.text if data else "(empty file)", truncated=lim.truncated, omitted_bytes=lim.omitted)


def write_file(workspace: Path, args: Mapping[str, Any], mutant: str | None = None) -> ToolOutcome:
    path = resolve(workspace, str(args.get("path", "")))
    content = args.get("content")
    if not isinstance(content, str):
        return ToolOutcome("write_file: 'content' must be a string", is_error=True, status="error")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    except OSError as exc:
        if mutant == "ack_failed_write":  # the defect: a write that did not happen is acknowledged
            return ToolOutcome(f"Wrote {len(content.encode('utf-8'))} bytes to {path}")
        return ToolOutcome(f"write_file: cannot write {path}: {exc}", is_error=True, status="error")
    return ToolOutcome(f"Wrote {len(content.encode('utf-8'))} bytes to {path}")


def edit_file(workspace: Path, args: Mapping[str, Any]) -> ToolOutcome:
    path = resolve(workspace, str(args.get("path", "")))
    old, new = args.get("old_string"), args.get("new_string")
    if not isinstance(old, str) or not isinstance(new, str) or not old:
        return ToolOutcome("edit_file: 'old_string' (non-empty) and 'new_string' must be strings",
                           is_error=True, status="error")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return ToolOutcome(f"edit_file: cannot read {path}: {exc}", is_error=True, status="error")
    count = text.count(old)
    if count == 0:
        return ToolOutcome(f"edit_file: old_string not found in {path}", is_error=True, status="error")
    if count > 1 and not args.get("replace_all"):
        return ToolOutcome(f"edit_file: old_string occurs {count} times in {path}; add context or set "
                           "replace_all", is_error=True, status="error")
    path.write_text(text.replace(old, new), encoding="utf-8")
    return ToolOutcome(f"Edited {path}: replaced {count} occurrence{'s' if count > 1 else ''}")
