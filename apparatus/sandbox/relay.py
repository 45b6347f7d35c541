"""Inside-the-sandbox end of a host bridge (stdlib only, run with ``python -I``).

Usage: ``python -I relay.py <socket>``. Connects to the host bridge's unix socket,
copies this process's stdin to it (raw bytes, half-close on EOF) and writes the
framed answer to stdout: frames are ``b"o" + 4-byte length + data`` (stdout of the
host command) and a final ``b"x" + 4-byte exit code``. Exits with the host
command's exit code (255 when the bridge vanished without one).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
from typing import Any


def _netrelay() -> Any:
    """The stdlib-only sibling module, loaded by its file: this runs as a stand-alone script
    (``python -I``), where the package may not be importable, and must not put its folder on
    ``sys.path`` (it would shadow installed packages)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netrelay.py")
    spec = importlib.util.spec_from_file_location("_tt_netrelay", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def main(path: str) -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)

    threading.Thread(target=_netrelay().stdin_to, args=(sock,), daemon=True).start()
    out = sys.stdout.buffer
    while True:
        head = _read_exact(sock, 5)
        if head is None:
            return 255
        kind, value = head[:1], int(struct.unpack(">i", head[1:])[0])
        if kind == b"x":
            return value
        data = _read_exact(sock, value)
        if data is None:
            return 255
        try:
            out.write(data)
            out.flush()
        except BrokenPipeError:
            return 141


if __name__ == "__main__":
    os._exit(main(sys.argv[1]))
