"""Self-test of C1-sensor-dump-003's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built around a real run of the workspace's ``pull_readings.py``.

Faithful: the pull, the reference's read_file result (the first 256 KiB of the one-line dump and
its notice, as the gateway recorder keeps it: first and last 32 KiB), ``tail -c 400`` of the dump,
intake.json with the batch and the digest - every criterion passes.
Broken: the same run as ``reference+truncate_silently`` records it - the read is cut at 256 KiB
with no notice, the agent has no reason to read the end and writes ``null``: H1, H3 and A1 fail,
A2 holds, H2 is not scored (no notice states anything).
Misreported: the notice states half the omitted bytes (``reference+misreport_omitted``): H2 alone
fails.

Run ``python tasks/C1-sensor-dump-003/verifier/selftest.py`` (exit 0 when all three hold).
"""

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score

PACK = HERE.parent
READ_LIMIT = 256 * 1024  # the reference harness's read_file limit
EDGE = 32 * 1024  # the gateway recorder keeps the first and last 32 KiB of a delivered result


def _entry(call_id, text):
    """A gateway tool-result record as the recorder writes it."""
    data = text.encode("utf-8")
    capped = len(data) > 2 * EDGE
    content = data[:EDGE].decode("utf-8", "ignore") + data[-EDGE:].decode("utf-8", "ignore") if capped else text
    return {"id": call_id, "is_error": False, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "content": content, "content_truncated": capped}


def _reference_read(text, path, mode):
    data = text.encode("utf-8")
    shown = data[:READ_LIMIT].decode("utf-8")
    if mode == "silent":
        return shown
    omitted = len(data) - READ_LIMIT
    said = omitted // 2 if mode == "lie" else omitted
    return (f"{shown}\n[file truncated: showing the first {READ_LIMIT} of {READ_LIMIT + said} bytes; {said} bytes "
            f"omitted. Read the rest of {path} with offset/limit (lines).]")


def _context(root, mode):
    ws = root / mode
    shutil.copytree(PACK / "workspace", ws)
    pulled = subprocess.run([sys.executable, "-B", "pull_readings.py"], cwd=ws, check=True, capture_output=True,
                            text=True).stdout
    batch, path = re.search(r"Pulled batch (\S+): saved (\S+)", pulled).groups()
    text = (ws / path).read_text(encoding="utf-8")
    recover = mode != "silent"
    results = [("call_1", "python3 pull_readings.py", "Exit code 0\n" + pulled),
               ("call_2", path, _reference_read(text, ws / path, mode))]
    if recover:
        results.append(("call_3", f"tail -c 400 {path}", "Exit code 0\n" + text[-400:]))
    digest = score.digest_of(results[-1][2]) if recover else None
    (ws / "intake.json").write_text(json.dumps({"batch": batch, "digest": digest}), encoding="utf-8")
    gateway = [{"index": i + 2, "status": 200, "error": None, "wire_format": "chat",
                "tool_results": [_entry(cid, out)]} for i, (cid, _, out) in enumerate(results)]
    probe = {"requests": [{"index": i + 1, "action": "shell", "call_id": cid, "arguments": {"command": arg}}
                          for i, (cid, arg, _) in enumerate(results)]}
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=None, oracle=None, events=[],
                           gateway=gateway, probe=probe, ledgers={}, run_dir=ws)


def _failed(verdicts):
    return {k for k, v in verdicts.items() if v[0] is False}


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), "faithful"))
        assert all(v[0] is True for v in good.values()), good
        bad = score.score(_context(Path(tmp), "silent"))
        assert _failed(bad) == {score.H1, score.H3, score.A1}, bad
        assert bad[score.A2][0] is True and bad[score.H2][0] is None, bad
        assert "NO notice" in bad[score.H1][1] and "without notice" in bad[score.H3][1], bad
        lie = score.score(_context(Path(tmp), "lie"))
        assert _failed(lie) == {score.H2} and "OFF" in lie[score.H2][1], lie


if __name__ == "__main__":
    selftest()
    print("selftest ok")
