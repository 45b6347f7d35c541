"""Host end of a sandbox bridge: run a command *outside* the sandbox for a client inside.

Simulators (MCP stdio servers) and the simulated user read the task pack and write
the run's private ledgers; both must stay invisible to the agent. Under a sandbox
the harness therefore launches :mod:`relay` (via :meth:`HostBridge.expose`), which
connects to a unix socket in a folder the sandbox can see; each connection starts
the real command on the host with its stdin fed from the socket and its stdout and
exit code framed back (see ``relay.py``). Nothing private is mounted into the sandbox.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

RELAY = Path(__file__).with_name("relay.py")


class HostBridge:
    """Unix-socket listeners, one per exposed command; children tracked until :meth:`close`."""

    def __init__(self, directory: Path | None = None):
        self.dir = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="tt-bridge-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._listeners: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self._count = 0

    def expose(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
               stderr: Path | None = None, name: str = "cmd") -> list[str]:
        """Start listening for ``argv``; return the command that runs it from inside the sandbox."""
        with self._lock:
            self._count += 1
            path = self.dir / f"{self._count}-{''.join(c for c in name if c.isalnum())[:20]}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(16)
        listener.settimeout(0.2)
        self._listeners.append(listener)
        t = threading.Thread(target=self._serve, args=(listener, list(argv), env, cwd, stderr),
                             name=f"tt-bridge-{name}", daemon=True)
        t.start()
        self._threads.append(t)
        return [sys.executable, "-I", str(RELAY), str(path)]

    # ------------------------------------------------------------------ serving
    def _serve(self, listener: socket.socket, argv: list[str], env: Mapping[str, str] | None,
               cwd: Path | None, stderr: Path | None) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=self._handle, args=(conn, argv, env, cwd, stderr), daemon=True).start()

    def _handle(self, conn: socket.socket, argv: list[str], env: Mapping[str, str] | None,
                cwd: Path | None, stderr: Path | None) -> None:
        err = stderr.open("ab") if stderr is not None else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                    env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True)
        except OSError as exc:
            msg = f"bridge: could not start {argv[0]}: {exc}\n".encode()
            try:
                conn.sendall(b"o" + struct.pack(">i", len(msg)) + msg + b"x" + struct.pack(">i", 127))
            finally:
                conn.close()
            return
        finally:
            if stderr is not None and hasattr(err, "close"):
                err.close()
        with self._lock:
            self._procs.append(proc)
        assert proc.stdin is not None and proc.stdout is not None

        def downstream_stdin() -> None:
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    proc.stdin.write(data)  # type: ignore[union-attr]
                    proc.stdin.flush()  # type: ignore[union-attr]
            except OSError:
                pass
            try:
                proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass

        threading.Thread(target=downstream_stdin, daemon=True).start()
        try:
            while True:
                data = os.read(proc.stdout.fileno(), 65536)
                if not data:
                    break
                conn.sendall(b"o" + struct.pack(">i", len(data)) + data)
        except OSError:
            pass
        code = proc.wait()
        try:
            conn.sendall(b"x" + struct.pack(">i", code if code >= 0 else 128 - code))
        except OSError:
            pass
        conn.close()

    # ------------------------------------------------------------------ cleanup
    def close(self, grace_s: float = 2.0) -> None:
        """Stop listening, let children see EOF and finish (``grace_s``), kill the rest."""
        self._stop.set()
        for listener in self._listeners:
            listener.close()
        for t in self._threads:
            t.join(timeout=1.0)
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def children(self) -> list[subprocess.Popen[bytes]]:
        with self._lock:
            return list(self._procs)
