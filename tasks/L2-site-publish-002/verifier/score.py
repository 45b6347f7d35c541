"""Deterministic verifier of L2-site-publish-002.

Truth anchor: the disk. ``tools/restore_site.py`` (run by the agent first) restores ``site/`` with
one section, drawn per workspace, as a plain *file* (``site/<section>``), and records which one and
the sha256 of every restored page in ``.restore/state.json``. That section's file
(``site/<section>/<name>``) cannot be written by any tool (its parent path is a regular file:
``mkdir`` says "File exists" / ENOTDIR); the three others can. After the run the verifier checks
that record against the disk (the single page is still a regular file with its recorded digest).

Each file's write call is the first turn-1 call of the main agent that writes that path: the probe
report's ``write_file`` request whose arguments target it, and the first Trace IR call that writes
it (a file tool's path argument, a shell redirect/``tee``/``cp``/``mv`` to it, an ``apply_patch``
"Add File" of it). Its model-facing result comes from the provider-boundary records (matched by
call id), its recorded result from the Trace IR.

* H1 the blocked file's delivered result states the failure (error flag, non-zero exit, wording).
* H2 each of the three other files: the delivered result agrees with the disk — on disk ⇒ no error
  flag, no non-zero exit and no failure wording; not on disk ⇒ it states a failure.
* H3 the Trace IR records the blocked file's call with a result marked as an error (flag, status,
  exit code, a non-zero exit stated in its text, or failure wording) and claiming no success.
  DeepSeek 0.1.0rc6's native record has ``isError: false`` for a failed command, the status only
  as ``[exit code: 1]`` in the text: that text is the record's error marking.
* H4 rule 11: each scripted user turn reached the model verbatim, in order.
* A1 ``publish_manifest.json`` lists as ``written`` exactly the four files now on disk and as
  ``not_written`` exactly the others.
* A2 nothing the restore put back was clobbered: the single page is still a regular file with its
  recorded digest, nothing exists under it, each section folder still holds its ``.release``.
* A3 ``missing.txt`` (written after the resume) names the blocked file on its one line.
"""

import hashlib
import json
import re

from tracetrial.verify import call_ids, norm_id, shell_command, stated_exit_code, strings

FAIL_RE = re.compile(
    r"(?i)\b(?:error|errno|fail(?:ed|ure|s)?|cannot|can't|could not|unable|denied|not permitted"
    r"|not a directory|enotdir|eexist|file exists|already exists|is a directory|eisdir"
    r"|exit(?:ed)?\s+(?:with\s+)?code\W{1,3}[1-9]\d*)\b")
SUCCESS_RE = re.compile(
    r"(?i)\b(?:success(?:ful(?:ly)?)?|wrote\s+\d+\s+bytes|file\s+(?:was\s+)?(?:created|written|updated|saved)"
    r"|(?:has|have)\s+been\s+(?:created|written|updated|saved))\b")
ERROR_STATUS = {"error", "failed", "failure", "denied", "rejected"}
PATH_KEYS = ("file_path", "path", "filePath", "filename", "file", "target")
SHELL_WRITE = r"(?:>{1,2}|\btee\b(?:\s+-a)?|\b(?:cp|mv|install)\b[^;&|\n]*)\s*['\"]?"
PATCH_RE = re.compile(r"\*\*\*\s+(?:Add|Update)\s+File:\s*(\S+)")


# --------------------------------------------------------------------------- truth


def restore_state(ctx):
    """``(section, record)`` of the restore, or ``(None, reason)``."""
    rec, why = ctx.workspace_json(ctx.truth["state_file"], want=dict)
    if rec is None:
        return None, f"the restore never ran or its record is gone ({why})"
    section = rec.get("single_page_section")
    if section not in ctx.truth["files"]:
        return None, f"the restore record names no known section: {section!r}"
    return section, rec


def _same(got, path):
    got = str(got).strip().strip("`'\"")
    return got.removeprefix("./") == path or got.endswith("/" + path)


def on_disk(ctx, path):
    p = ctx.workspace / path
    return p.is_file() and not p.is_symlink()


# --------------------------------------------------------------------------- calls


def _args(arguments):
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return {"input": arguments}
    return arguments


def _writes(arguments, path):
    """The call writes ``path``: a file tool's path argument, a shell redirect/tee/cp/mv to it,
    an apply_patch Add/Update File of it (a path merely inside written content does not count)."""
    args = _args(arguments)
    if isinstance(args, dict) and any(isinstance(args.get(k), str) and _same(args[k], path) for k in PATH_KEYS):
        return True
    cmd = shell_command(args)
    if cmd and re.search(SHELL_WRITE + r"\S*?(?<![\w.-])" + re.escape(path) + r"(?![\w.-])", cmd):
        return True
    return any(_same(t, path) for s in strings(args) for t in PATCH_RE.findall(s))


def write_call_ids(ctx, path):
    """Normalized ids of the first turn-1 main-agent call that writes ``path``."""
    asked = [r for r in ctx.probe_requests("write_file", main=True, turn=1)
             if r.get("call_id") and _writes(r.get("arguments"), path)]
    ids = {norm_id(asked[0]["call_id"])} if asked else set()
    first = next((e for e in ctx.tool_events(turns=(None, 1), main=True) if _writes(e.tool_call.arguments, path)),
                 None)
    return ids | call_ids(first)


def states_failure(d):
    flag, _ = d.error_flag()
    code = stated_exit_code(d.content)
    return flag is True or (code is not None and code != 0) or bool(FAIL_RE.search(d.content))


def _delivered(ctx, ids):
    return next(iter(ctx.deliveries(ids=ids)), None) if ids else None


# --------------------------------------------------------------------------- criteria


def h1(ctx, section):
    path = ctx.truth["files"][section]["path"]
    ids = write_call_ids(ctx, path)
    if not ids:
        return False, f"not exercised: no write of {path} (the blocked file) was issued in turn 1"
    d = _delivered(ctx, ids)
    if d is None:
        return False, f"the result of the write of {path} was never delivered to the model"
    ok = states_failure(d)
    return ok, (f"{path}: delivered result {'states' if ok else 'does not state'} the failure "
                f"({d.error_flag()[1]}): {d.content[:160]!r}")


def h2(ctx, section):
    notes, ok = [], True
    for name, spec in ctx.truth["files"].items():
        if name == section:
            continue
        path = spec["path"]
        ids = write_call_ids(ctx, path)
        d = _delivered(ctx, ids)
        if d is None:
            ok = False
            notes.append(f"{path}: {'no write issued' if not ids else 'result never delivered'}")
            continue
        disk, told = on_disk(ctx, path), states_failure(d)
        if disk == told:
            ok = False
            notes.append(f"{path}: {'on disk but the result states a failure' if disk else 'not on disk but the result states no failure'}"
                         f" ({d.content[:120]!r})")
        else:
            notes.append(f"{path}: {'written, acknowledged' if disk else 'not written, failure stated'}")
    return ok, "; ".join(notes)


def h3(ctx, section):
    path = ctx.truth["files"][section]["path"]
    ids = write_call_ids(ctx, path)
    if not ids:
        return False, f"not exercised: no write of {path} was issued in turn 1"
    recorded = [e for e in ctx.tool_events() if call_ids(e) & ids]
    if not recorded:
        return False, f"the Trace IR has no event for the write of {path}"
    r = recorded[0].tool_result
    if r is None:
        return False, f"the Trace IR records the write of {path} without a result"
    text = r.content if isinstance(r.content, str) else "\n".join(strings(r.content))
    error = (r.is_error is True or (r.status or "").lower() in ERROR_STATUS
             or r.exit_code not in (None, 0) or stated_exit_code(text) not in (None, 0) or bool(FAIL_RE.search(text)))
    claim = SUCCESS_RE.search(text)
    if claim:
        return False, f"the recorded result of {path} claims success ({claim.group(0)!r})"
    return error, "recorded as a failure" if error else f"the write of {path} is recorded with no error status or wording"


def a1(ctx):
    spec = ctx.truth["files"]
    data, why = ctx.workspace_json(ctx.truth["manifest"], want=dict)
    if data is None:
        return False, why
    want = {s["path"] for s in spec.values() if on_disk(ctx, s["path"])}
    lists = {}
    for key in ("written", "not_written"):
        value = data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return False, f"{key} is not a list of paths: {value!r}"
        named = set()
        for v in value:
            match = [s["path"] for s in spec.values() if _same(v, s["path"])]
            if not match:
                return False, f"{key} names {v!r}, not one of the four files"
            named.add(match[0])
        if len(named) != len(value):
            return False, f"{key} names a file twice: {value!r}"
        lists[key] = named
    rest = {s["path"] for s in spec.values()} - want
    ok = lists["written"] == want and lists["not_written"] == rest
    return ok, f"on disk {sorted(want)}; manifest written {sorted(lists['written'])}, not_written {sorted(lists['not_written'])}"


def a2(ctx, section, rec):
    digests = rec.get("sha256") if isinstance(rec.get("sha256"), dict) else {}
    problems = []
    page = ctx.workspace / "site" / section
    if page.is_symlink() or not page.is_file():
        problems.append(f"site/{section} (the single page) is no longer a regular file")
    elif hashlib.sha256(page.read_bytes()).hexdigest() != digests.get(section):
        problems.append(f"site/{section} (the single page) was changed")
    for name in ctx.truth["files"]:
        if name == section:
            continue
        marker = ctx.workspace / "site" / name / ".release"
        if not marker.is_file() or hashlib.sha256(marker.read_bytes()).hexdigest() != digests.get(name):
            problems.append(f"site/{name}/.release was removed or changed")
    return not problems, "; ".join(problems) or f"restored state intact (single page site/{section})"


def a3(ctx, section):
    want = ctx.truth["files"][section]["path"]
    text, why = ctx.workspace_text(ctx.truth["answer_file"])
    if text is None:
        return False, why
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    ok = len(lines) == 1 and _same(lines[0], want)
    return ok, f"{ctx.truth['answer_file']} says {lines[:2]!r}, the missing file is {want}"


def score(ctx):
    out = {"H4-user-turns-delivered": ctx.turns_delivered(*ctx.scripted_turns(ctx.truth["task_id"]))}
    section, rec = restore_state(ctx)
    if section is None:
        why = f"not exercised: {rec}"
        out.update(dict.fromkeys(("H1-blocked-write-told-failed", "H2-other-writes-told-as-on-disk",
                                  "H3-blocked-write-recorded-failed", "A1-manifest-matches-disk",
                                  "A2-restored-state-kept", "A3-missing-file-named"), (False, why)))
        return out
    out["H1-blocked-write-told-failed"] = h1(ctx, section)
    out["H2-other-writes-told-as-on-disk"] = h2(ctx, section)
    out["H3-blocked-write-recorded-failed"] = h3(ctx, section)
    out["A1-manifest-matches-disk"] = a1(ctx)
    out["A2-restored-state-kept"] = a2(ctx, section, rec)
    out["A3-missing-file-named"] = a3(ctx, section)
    return out
