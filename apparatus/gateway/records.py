"""Provider-boundary records (SPEC §8): the on-disk schema and the per-run writer.

Layout under the gateway's ``records_dir``::

    <records_dir>/<run_id>/
        requests.jsonl          one RequestRecord per provider request, in arrival order
        bodies/<index>.json     raw request bytes, only with record_bodies=True

Never stored: request headers (so no auth material). Request bodies are kept only as
``body_sha256`` unless bodies are recorded.

Never stored in clear: the run's planted secrets (and the credential values of the proxy's
environment). The cell registers its task's secrets with the gateway before the harness
starts (:meth:`apparatus.gateway.Gateway.register_run`); every line and body is written
through a values-only :class:`~tracetrial.redact.Redactor`, so ``[REDACTED]`` stands where
a secret was. Where the secrets went stays evidence: ``planted_secrets`` counts each one in
the raw body before redaction (the cell's ``evidence/secret_scan.json`` reads it).
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from pydantic import Field

from tracetrial.harness import WireFormat
from tracetrial.model import StrictModel
from tracetrial.redact import Redactor, occurrences

REQUESTS_FILE = "requests.jsonl"
BODIES_DIR = "bodies"
#: Run ids name a directory: one path component of these characters.
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}$")


class ToolDecl(StrictModel):
    """One declared tool, normalized across wire formats."""

    name: str
    type: str = Field(description="'function' for client-defined callable tools in every format "
                                  "(Anthropic custom tools, OpenAI function tools); otherwise the "
                                  "provider's type ('custom', 'web_search', 'bash_20250124', ...).")
    description: str | None
    input_schema: Any = Field(description="JSON schema (Anthropic input_schema, OpenAI parameters) "
                                          "or the grammar/format of a 'custom' tool.")
    namespace: str | None = Field(description="Codex namespace group name (e.g. 'mcp__srv'), else null.")


class ToolResultRecord(StrictModel):
    """A tool result delivered to the model by this request."""

    id: str | None
    is_error: bool | None = Field(description="Anthropic is_error (absent = false); null for formats "
                                              "without the flag (Responses, Chat).")
    size: int = Field(description="UTF-8 bytes of the full content text.")
    sha256: str = Field(description="SHA-256 of the full content text.")
    content: str = Field(description="Full text, or first 32 KiB + last 32 KiB concatenated.")
    content_truncated: bool


class Usage(StrictModel):
    """Token usage of one call; ``input_tokens`` includes cache reads and writes."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None


class RequestRecord(StrictModel):
    """One line of ``requests.jsonl``. Field order is the file format: do not reorder."""

    index: int = Field(ge=0, description="0-based arrival order within the run.")
    run_id: str
    path: str = Field(description="API path and query the provider sees, e.g. '/v1/messages?beta=true'.")
    wire_format: WireFormat
    model: str | None
    stream: bool
    started_at: str = Field(description="Arrival time, ISO 8601 UTC.")
    duration_ms: float | None = Field(description="Arrival to the last response byte.")
    status: int | None = Field(description="Upstream HTTP status (null if none was received).")
    error: str | None = Field(description="Upstream or gateway error message, also for in-stream errors.")
    tools: list[ToolDecl]
    inventory_present: bool = Field(description="The request carried a tools list.")
    inventory_complete: bool = Field(description="Every declaration was structurally valid.")
    inventory_fingerprint: str | None
    tool_results: list[ToolResultRecord] = Field(
        description="Results after the last model-produced history item: the ones this "
                    "request delivers (earlier ones were delivered by earlier requests).")
    usage: Usage | None
    body_sha256: str = Field(description="SHA-256 of the raw request body bytes.")
    last_user_text: str | None
    planted_secrets: list[int] = Field(
        default_factory=list,
        description="Occurrences of each of the run's planted secrets (in the order the cell registered "
                    "them) in the raw request body, counted before they were redacted from this record.")


def read_records(path: Path) -> list[dict[str, Any]]:
    """Lines of a ``requests.jsonl`` (a missing file is an empty run)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class RunLog:
    """Per-run writer: hands out arrival indices and writes finished records in index order.

    A record finished before an earlier one is held back until the earlier one is written,
    so ``requests.jsonl`` is always in arrival order. Each line is appended with a single
    ``O_APPEND`` write, so readers never see a partial line.
    """

    def __init__(self, run_dir: Path, *, record_bodies: bool, redactor: Redactor | None = None,
                 planted: tuple[str, ...] = ()):
        self.run_dir = run_dir
        self.record_bodies = record_bodies
        #: Applied to every line and body written (values only; see the module docstring).
        self.redactor = redactor if redactor is not None else Redactor(patterns=False)
        #: The run's planted secrets, in order: counted by :meth:`planted_hits`.
        self.planted = planted
        self._lock = threading.Lock()
        self._arrived = 0
        self._next_write = 0
        self._done: dict[int, bytes] = {}
        self._written = 0

    @property
    def path(self) -> Path:
        return self.run_dir / REQUESTS_FILE

    def arrive(self, raw_body: bytes) -> int:
        """Register a new request; writes its body when bodies are recorded."""
        with self._lock:
            index = self._arrived
            self._arrived += 1
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.record_bodies:
            bodies = self.run_dir / BODIES_DIR
            bodies.mkdir(exist_ok=True)
            (bodies / f"{index}.json").write_bytes(self.redactor.bytes_(raw_body))
        return index

    def planted_hits(self, raw_body: bytes) -> list[int]:
        """Occurrences of each planted secret in ``raw_body`` (the record's ``planted_secrets``)."""
        return occurrences(raw_body, self.planted)

    def finish(self, record: RequestRecord) -> None:
        line = self.redactor.text(record.model_dump_json()).encode("utf-8") + b"\n"
        with self._lock:
            self._done[record.index] = line
            ready: list[bytes] = []
            while self._next_write in self._done:
                ready.append(self._done.pop(self._next_write))
                self._next_write += 1
            if ready:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, b"".join(ready))
                finally:
                    os.close(fd)
                self._written += len(ready)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {"arrived": self._arrived, "written": self._written}
