"""Loopback ports through a sandbox with no network (``isolation.yaml`` ``network: none``).

A network-restriction task gives the agent no network at all, yet the harness must still
reach the gateway on the host's loopback. Both halves of the tunnel live here:

* :class:`HostForwarder` (host side): a unix socket in the cell's bridge folder; each
  connection is joined to ``127.0.0.1:<port>`` on the host.
* ``python -I netrelay.py [--status FILE] --forward PORT=SOCKET ... -- ARGV`` (inside the
  sandbox, stdlib only): listens on ``127.0.0.1:PORT`` in the sandbox's own network
  namespace, joins each connection to ``SOCKET``, runs ``ARGV`` as its child (stdio
  inherited, SIGTERM/SIGINT passed on), writes the child's raw exit status to ``FILE``
  and exits with the child's exit code (the bwrap backend, for ``network: none`` tasks).
  The docker backend's cell keeper (:mod:`apparatus.sandbox.spawner`) opens the same
  forwarders itself, with this module's accept loop, for the life of the container.

Only the listed ports cross; everything else — other host ports, the outside world —
stays unreachable.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path


def _copy(read: Callable[[int], bytes], dst: socket.socket) -> None:
    """Copy what ``read`` returns to ``dst`` until EOF, then half-close ``dst``'s write side
    so the far end sees EOF too."""
    try:
        while True:
            data = read(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def stdin_to(sock: socket.socket, fd: int = 0) -> None:
    """Copy stdin to ``sock`` (half-closed at EOF). Shared by the bridge relay and the docker
    launcher, which run as stand-alone scripts and import this module by its folder."""
    _copy(lambda n: os.read(fd, n), sock)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    _copy(src.recv, dst)


def _join(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides close, then close both."""
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    t = threading.Thread(target=_pump, args=(b, a), daemon=True)
    t.start()
    _pump(a, b)
    t.join()
    a.close()
    b.close()


def _accept_loop(listener: socket.socket, connect: object) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        try:
            peer = connect()  # type: ignore[operator]
        except OSError:
            conn.close()
            continue
        if isinstance(peer, socket.socket) and peer.family == socket.AF_INET:
            peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if conn.family == socket.AF_INET:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_join, args=(conn, peer), daemon=True).start()


class HostForwarder:
    """Host end: ``<directory>/tcp-<port>.sock`` → ``127.0.0.1:<port>``."""

    def __init__(self, directory: Path, port: int):
        self.port = port
        self.path = Path(directory) / f"tcp-{port}.sock"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(64)

        def connect() -> socket.socket:
            return socket.create_connection(("127.0.0.1", port), timeout=30)

        self._thread = threading.Thread(target=_accept_loop, args=(self._listener, connect),
                                        name=f"tt-forward-{port}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def command(forwards: dict[int, Path], argv: list[str], python: str = sys.executable,
            status: Path | None = None) -> list[str]:
    """The argv that runs ``argv`` inside a network-less sandbox with ``forwards`` open
    (``status``: a file that receives the child's raw exit status, negative for a signal)."""
    out = [python, "-I", str(Path(__file__).resolve())]
    if status is not None:
        out += ["--status", str(status)]
    for port, sock in sorted(forwards.items()):
        out += ["--forward", f"{port}={sock}"]
    return out + ["--", *argv]


def main(args: list[str]) -> int:
    forwards: list[tuple[int, str]] = []
    status: str | None = None
    while args and args[0] in ("--forward", "--status"):
        if args[0] == "--status":
            status = args[1]
        else:
            port_text, _, sock_path = args[1].partition("=")
            forwards.append((int(port_text), sock_path))
        args = args[2:]
    if not args or args[0] != "--":
        print("usage: netrelay.py [--forward PORT=SOCKET]... -- ARGV", file=sys.stderr)
        return 2
    argv = args[1:]
    for port, path in forwards:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", port))
        except OSError:
            # Another process of the cell (same namespace) already relays this port to the
            # same host socket: its opening serves this process too.
            listener.close()
            continue
        listener.listen(64)

        def connect(path: str = path) -> socket.socket:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            return s

        threading.Thread(target=_accept_loop, args=(listener, connect), daemon=True).start()
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        print(f"netrelay: could not start {argv[0]}: {exc}", file=sys.stderr)
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    code = child.wait()
    if status is not None:
        # An init in between (docker's tini) turns a signal death into 128+N, which a
        # harness may also exit with; the raw status keeps a crash a crash.
        Path(status).write_text(str(code))
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
