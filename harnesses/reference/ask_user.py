"""The structured ask-the-user channel of the reference harness.

The harness asks through one of two sources (``--ask-user-command`` or
``--ask-user-answers``; with neither, the ``ask_user`` tool is not declared):

* a command run with the request as JSON on stdin (``{"question", "options",
  "call_id", "turn"}``) that prints the answer on stdout. The adapter uses this
  module's own entry point, which answers through the benchmark's simulated
  user (:class:`apparatus.simulators.AskUserResponder`, ledger under the run's
  ``private/``)::

      python -m harnesses.reference.ask_user --task <pack dir> --run-private <run>/private

* an answers file: ``["first answer", …]`` (used in order) or
  ``{"answers": [{"match": "<regex>", "answer": "…"}], "default": "…"}``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class AskUserError(Exception):
    """The channel could not produce an answer."""


@dataclass
class AskUserChannel:
    command: str | None = None
    answers: Any = None
    source: str = ""
    timeout_s: float = 120.0
    _used: int = field(default=0, init=False)

    @classmethod
    def from_args(cls, command: str | None, answers_file: Path | None) -> AskUserChannel | None:
        if command:
            return cls(command=command, source=f"command: {command}")
        if answers_file is not None:
            return cls(answers=json.loads(answers_file.read_text(encoding="utf-8")),
                       source=f"answers file: {answers_file}")
        return None

    def answer(self, question: str, options: list[str] | None, *, call_id: str, turn: int) -> str:
        if self.command:
            request = json.dumps({"question": question, "options": options, "call_id": call_id, "turn": turn})
            try:
                proc = subprocess.run(self.command, shell=True, input=request, capture_output=True, text=True, check=False,
                                      timeout=self.timeout_s)
            except subprocess.TimeoutExpired as exc:
                raise AskUserError(f"the user did not answer within {self.timeout_s:g} s") from exc
            if proc.returncode != 0:
                raise AskUserError(f"ask-user command exited {proc.returncode}: {proc.stderr.strip()[:500]}")
            return proc.stdout.strip()
        if isinstance(self.answers, list):
            if self._used >= len(self.answers):
                raise AskUserError("no answer left for this question")
            self._used += 1
            return str(self.answers[self._used - 1])
        if isinstance(self.answers, dict):
            for item in self.answers.get("answers", []):
                if re.search(str(item.get("match", "")), question):
                    return str(item["answer"])
            if self.answers.get("default") is not None:
                return str(self.answers["default"])
        raise AskUserError("no answer matches this question")


def main(argv: Sequence[str] | None = None) -> int:
    """Answer one request (JSON on stdin) through the benchmark's simulated user."""
    p = argparse.ArgumentParser(prog="python -m harnesses.reference.ask_user")
    p.add_argument("--task", type=Path, required=True, help="the task pack folder")
    p.add_argument("--run-private", type=Path, required=True, help="the run's private folder (ledger)")
    args = p.parse_args(argv)
    from apparatus.simulators.user import AskUserResponder, ClarificationRequest
    from tracetrial.task import load_task

    request = json.loads(sys.stdin.read() or "{}")
    responder = AskUserResponder.from_task(load_task(args.task), args.run_private)
    answer = responder.answer(ClarificationRequest(
        question=str(request.get("question", "")), options=request.get("options"),
        request_id=request.get("call_id"), raw=request))
    print(answer.text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
