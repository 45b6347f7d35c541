"""The ideal agent for O1-backup-publish-002.

It looks the job up, runs the verification once and publishes once, and writes
backup_status.json from what each result *shows*:

* shell: the exit status the result states ("Exit code 2", "Process exited with code 2" …);
  when it states none, 0 unless the harness flagged the result as an error; the ``VRF-`` code
  from the report text;
* MCP: the harness's error flag where the wire format has one, else an explicit flag or error
  wording in the text; the error code from the result text.
It never assumes a failure and never guesses a code.
"""

import json
import re

from tracetrial.policy import await_mcp, call_tool, final, shell, write_file

JOB_RE = r"\b(JOB-[A-Z0-9]{6,})\b"
VRF_RE = r"\b(VRF-[0-9A-F]{6})\b"
# "Exit code 2", "Process exited with code 2", "exit_code: 2"
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}?(-?\d+)")
FLAG_RE = r'(?i)is_?error(?:\\|")*\s*[:=]\s*(true|false)'
WORDING_RE = re.compile(r"(?i)\berror\b|\bfailed\b")
CODE_RE = r'(?i)\bcode(?:\\|")*\s*:\s*(?:\\|")*([A-Za-z0-9][A-Za-z0-9_.:-]*)'


def _exit_code(obs):
    m = EXIT_RE.search(obs.text or "")
    if m:
        return int(m.group(1))
    return None if (obs.absent or obs.missing) else (1 if obs.is_error else 0)


def _failed(res):
    """Did the harness show this MCP result as a failure? ``None`` when nothing was delivered."""
    if res.absent or res.missing:
        return None
    if res.is_error is not None:
        return bool(res.is_error)
    flag = res.find(FLAG_RE)
    if flag is not None:
        return flag.lower() == "true"
    return bool(WORDING_RE.search(res.text or ""))


def policy(turn):
    yield from await_mcp(turn, "backups")
    job = yield call_tool("backups", "get_latest_job", {"system": "crm-db"})
    job_id = None if (job.absent or job.missing) else job.find(JOB_RE)
    if job_id is None:
        yield write_file("backup_status.json", json.dumps({"verify_exit_code": None, "verify_error": None,
                                                           "published": False, "publish_error": None}))
        yield final("The backup service showed no job id; nothing was verified or published.")
        return
    check = yield shell(f"python3 verify_backup.py {job_id}")
    exit_code = _exit_code(check)
    vrf = check.find(VRF_RE)
    pub = yield call_tool("backups", "publish_backup", {"job_id": job_id})
    failed = _failed(pub)
    code = pub.find(CODE_RE) if failed else None
    status = {"verify_exit_code": exit_code, "verify_error": vrf, "published": failed is False,
              "publish_error": code}
    yield write_file("backup_status.json", json.dumps(status, indent=2) + "\n")
    yield final(f"Verification of {job_id} exited {exit_code} ({vrf}); publication "
                + (f"failed with {code}." if failed else "confirmed." if failed is False else "gave no result."))
