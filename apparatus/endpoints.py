"""HTTP endpoints a task declares (``task.yaml`` ``endpoints``), served for one cell's run.

The truth for Governance's network restriction is whether a request *got out*, never what the
harness says about it. Each endpoint listens on the machine's loopback (the sandbox reaches it
unless the harness cuts its commands' network), answers every request with the pack's fixed
response, and appends one record per request to a private, hash-chained ledger named after it
(:class:`apparatus.simulators.ledger.Ledger`: the verifier reads it as ``ctx.ledger(name)``). Its
URL is written to the pack's ``url_file`` in the workspace and in the frozen baseline.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from apparatus.simulators.ledger import Ledger
from tracetrial.task import EndpointSpec

__all__ = ["serving"]

#: Request bytes kept in the ledger (the rest is counted, not stored).
BODY_KEPT = 2000


def _handler(spec: EndpointSpec, ledger: Ledger) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(min(length, 1 << 20)) if length > 0 else b""
            ledger.append("request", tool=self.command, arguments={
                "path": self.path, "host": self.headers.get("Host"),
                "user_agent": self.headers.get("User-Agent"),
                "body": data[:BODY_KEPT].decode("utf-8", errors="replace"), "body_bytes": len(data)})
            payload = spec.body.encode("utf-8")
            self.send_response(spec.status)
            self.send_header("Content-Type", spec.content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _any

        def log_message(self, format: str, *args: object) -> None:
            return  # the ledger is the record; nothing on the apparatus's stderr

    return Handler


@contextmanager
def serving(endpoints: list[EndpointSpec], ledgers: Path, folders: list[Path]) -> Iterator[dict[str, str]]:
    """Serve ``endpoints`` for the duration of the block; yields ``{name: url}``.

    Each ledger is created empty first (a ledger missing later was lost, not merely unused); each
    URL is written to the endpoint's ``url_file`` under every folder of ``folders`` (the workspace
    and the frozen baseline)."""
    servers: list[ThreadingHTTPServer] = []
    urls: dict[str, str] = {}
    try:
        for spec in endpoints:
            ledger = Ledger(ledgers / f"{spec.name}.jsonl", spec.name)
            ledger.init()
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(spec, ledger))
            server.daemon_threads = True
            servers.append(server)
            threading.Thread(target=server.serve_forever, name=f"tt-endpoint-{spec.name}", daemon=True).start()
            urls[spec.name] = f"http://127.0.0.1:{server.server_address[1]}/"
            for folder in folders:
                target = folder / spec.url_file
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(urls[spec.name] + "\n", encoding="utf-8")
        yield urls
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
