"""Processes of a docker cell, started by the container's PID 1 (no ``docker exec``).

Two halves, both stdlib only, loaded by file path (never as part of the package: the keeper
runs on the image's own Python, the launcher must not pay for the package's imports):

* **The keeper** (``python3 -I spawner.py keeper --socket PATH [--forward PORT=SOCKET]...
  tt-cell-keeper``) is PID 1 of the cell's container
  (:class:`~apparatus.sandbox.docker_backend.DockerSandbox`). It reaps orphans; it exits when
  its stdin ends (the owner's attach: the container goes with the process that ran the cell);
  for ``network: none`` it opens the tunnelled loopback ports itself (:mod:`~apparatus.sandbox.netrelay`'s
  forwarders, in the container's network namespace); and it **spawns the cell's processes**:
  it listens on a unix socket in the cell's folder (0700 on the host, bind mounted at its
  host path), receives a request (argv, env, cwd) with the caller's
  stdin/stdout/stderr as file descriptors (``SCM_RIGHTS``), starts the process in a session
  of its own with those fds, in ``cwd``, with the container's environment plus the request's
  (what ``docker exec -e NAME`` gave: image ``ENV`` plus the passed names), replies with its
  pid and, once it has ended, with its raw wait status. When the last running process of
  the cell ends, it first kills everything else in the container (``kill(-1, SIGKILL)`` from
  PID 1 of the container's PID namespace spares only itself; guarded: only as the cell
  keeper), so nothing a process leaves running outlives it — then replies. A ``kill``
  request, or the caller's connection dropping, kills the process's group.

* **The launcher** (``python -I -S -c BOOT spawner.py JOB``) is what
  :meth:`DockerSandbox.wrap` returns: it runs on the host, reads its job file (then deletes
  it: it holds the run's environment), connects, sends the request and its own stdio, and
  exits with the process's exit code (``128+N`` for a signal; the raw status goes to the job's
  status file, so :meth:`~apparatus.sandbox.Sandbox.exit_code` keeps a crash a crash).
  SIGTERM/SIGINT (the runner's deadline, or ``PR_SET_PDEATHSIG`` when its parent dies) become
  a kill request. A keeper that is gone is reported (exit 125, as ``docker`` does when it
  cannot run a command).

Why the socket gives the agent nothing it lacks: it is a channel to PID 1 *of the same
container*, which runs with the same uid, capabilities, namespaces, cgroup (limits), seccomp
and AppArmor profile as every process of the cell — exactly what ``docker exec`` processes
got. Whatever a confined process could start through it, it can start by itself with
``fork`` + ``exec``. The folder holding it is reachable only by the host's owner (0700) and
inside this container; nothing of the host is passed but the caller's own stdio, and a
regular file (or a terminal, or a socket) is never handed over as such: the launcher puts a
pipe in between, so, as under ``docker exec``, a process sees a stream and cannot reopen a
host file through ``/proc/self/fd``.
"""

from __future__ import annotations

import array
import errno
import json
import os
import signal
import socket
import stat
import struct
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the launcher need not pay for importing typing
    from typing import Any

#: The keeper's last argument; :func:`_sweep` refuses to run unless PID 1 carries it
#: (``kill(-1)`` anywhere else would kill far more than a cell).
KEEPER_MARK = "tt-cell-keeper"
#: The launcher's exit code when the spawner itself failed (no keeper, a refused request):
#: what ``docker run``/``docker exec`` exit with when they cannot run the command.
SPAWNER_FAILED = 125
#: A request larger than this is refused (an environment is a few kilobytes).
MAX_REQUEST = 8 << 20
#: How long the launcher waits for a keeper whose socket is not there yet (a container
#: that is starting; the engine may be slow under load).
START_TIMEOUT_S = 60.0
#: How long the launcher drains its interposed pipes after the process ended (the sweep has
#: closed them unless another process of the cell still runs and a leftover holds them).
DRAIN_S = 2.0
_HEADER = struct.Struct(">I")
_FDS = 3


# --------------------------------------------------------------------------- wire format
def send_request(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """One request: a 4-byte length, the JSON body; ``fds`` ride on its first byte."""
    payload = json.dumps(request).encode()
    data = _HEADER.pack(len(payload)) + payload
    sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    if sent < len(data):
        sock.sendall(data[sent:])


def recv_request(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The request and the descriptors that came with it (raises ``ValueError`` or
    ``TypeError`` when it is malformed, closing whatever descriptors arrived)."""
    fds = array.array("i")
    data, ancillary, flags, _ = sock.recvmsg(65536, socket.CMSG_SPACE(_FDS * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    received = list(fds)
    try:
        if flags & socket.MSG_CTRUNC:
            raise ValueError("too many descriptors")
        if len(received) != _FDS:
            raise ValueError(f"expected {_FDS} descriptors (stdin, stdout, stderr), got {len(received)}")
        data = _read_more(sock, data, _HEADER.size)
        (length,) = _HEADER.unpack(data[:_HEADER.size])
        if length > MAX_REQUEST:
            raise ValueError(f"request of {length} bytes (limit {MAX_REQUEST})")
        data = _read_more(sock, data, _HEADER.size + length)
        request = json.loads(data[_HEADER.size:_HEADER.size + length])
        _check(request)
    except (ValueError, TypeError, OSError):
        for fd in received:
            _close(fd)
        raise
    return request, received


def _read_more(sock: socket.socket, data: bytes, size: int) -> bytes:
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ValueError("the request ended early")
        data += chunk
    return data


def _check(request: Any) -> None:
    """A request is ``{"argv": [str, ...], "env": {str: str}, "cwd": str}`` (``TypeError``
    when it is not)."""
    if not isinstance(request, dict):
        raise TypeError("the request is not an object")
    argv, env, cwd = request.get("argv"), request.get("env"), request.get("cwd")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise TypeError("argv must be a non-empty list of strings")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise TypeError("env must map strings to strings")
    if not isinstance(cwd, str):
        raise TypeError("cwd must be a string")


def _reply(sock: socket.socket, message: dict[str, Any]) -> None:
    try:
        sock.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the launcher is gone: nobody to tell


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


# --------------------------------------------------------------------------- keeper
class Keeper:
    """PID 1 of a cell's container; see the module docstring."""

    def __init__(self, path: str) -> None:
        import subprocess

        self._subprocess = subprocess
        self.path = path
        self._lock = threading.Lock()
        #: pid -> (connection, process) of each spawned process still running.
        self._running: dict[int, tuple[socket.socket, Any]] = {}
        self._spawned = threading.Event()

    def serve(self) -> None:
        """Listen, then reap forever (the process ends with its stdin, :func:`_watch_stdin`)."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Bound under a temporary name and renamed once listening: to a launcher, a missing
        # socket means "not started yet" and a refused one "gone", never "starting".
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        listener.bind(temporary)
        os.chmod(temporary, 0o600)
        listener.listen(128)
        os.replace(temporary, self.path)
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        self._reap_forever()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                time.sleep(0.05)
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        """One launcher: its request, then its kill requests until it hangs up."""
        try:
            request, fds = recv_request(conn)
        except (ValueError, TypeError, OSError) as exc:
            _reply(conn, {"error": f"malformed request: {exc}", "code": SPAWNER_FAILED})
            conn.close()
            return
        try:
            pid = self._spawn(request, fds, conn)
        except OSError as exc:
            code = 127 if exc.errno == errno.ENOENT else 126 if exc.errno in (errno.EACCES, errno.ENOEXEC) else SPAWNER_FAILED
            if getattr(exc, "filename", None) == request["cwd"]:
                code = SPAWNER_FAILED
            _reply(conn, {"error": f"cannot run {request['argv'][0]!r} in {request['cwd']!r}: {exc.strerror or exc}",
                          "code": code})
            conn.close()
            return
        finally:
            for fd in fds:
                _close(fd)
        while True:
            try:
                data = conn.recv(256)
            except OSError:
                data = b""
            if not data:
                break  # the launcher hung up (ended, or was killed outright)
            if b"kill" in data:
                self._kill(pid)
        # A launcher that is gone cannot wait for its process: the process goes too.
        self._kill(pid)
        conn.close()

    def _spawn(self, request: dict[str, Any], fds: list[int], conn: socket.socket) -> int:
        env = dict(os.environ)
        env.update(request["env"])
        # Under the lock: the reaper cannot see this pid end before it is registered and its
        # pid is on its way (the pid is always the first reply, the status the second), and no
        # sweep runs while a process is starting.
        with self._lock:
            proc = self._subprocess.Popen(request["argv"], stdin=fds[0], stdout=fds[1], stderr=fds[2],
                                          cwd=request["cwd"], env=env, start_new_session=True, close_fds=True)
            self._running[proc.pid] = (conn, proc)
            _reply(conn, {"pid": proc.pid})
        self._spawned.set()
        return int(proc.pid)

    def _kill(self, pid: int) -> None:
        """SIGKILL the process group of ``pid`` if it still runs (under the lock: a pid the
        reaper has collected may be reused)."""
        with self._lock:
            if pid in self._running:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass

    def _reap_forever(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                # No child at all: wait for the next spawn (or look again soon).
                self._spawned.wait(0.5)
                self._spawned.clear()
                continue
            self._reaped(pid, status)

    def _reaped(self, pid: int, status: int) -> None:
        with self._lock:
            entry = self._running.pop(pid, None)
            if entry is None:
                return  # an orphan of the cell: reaped, nothing to report
            conn, proc = entry
            # Popen must never wait for this pid itself: it may be reused by then.
            proc.returncode = os.waitstatus_to_exitcode(status)
            if not self._running:
                _sweep()
        _reply(conn, {"status": status})


def _sweep() -> None:
    """Kill everything in the container but this keeper, and reap it (bounded: a process
    stuck in the kernel is not waited for)."""
    try:
        with open("/proc/1/cmdline", "rb") as fh:
            mine = KEEPER_MARK.encode() in fh.read()
    except OSError:
        return
    if os.getpid() != 1 or not mine:
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        return  # nothing else runs
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.002)


def _watch_stdin() -> None:
    """Exit when stdin ends: the owner's attach, closed with the process that ran the cell
    (or by its cleanup). As PID 1 exits, the kernel kills the rest of the container."""
    while True:
        try:
            if not os.read(0, 65536):
                break
        except OSError:
            break
    os._exit(0)


def _forward(port: int, path: str) -> None:
    """Open ``127.0.0.1:port`` in the container; each connection joins the host's socket."""
    import importlib.util

    netrelay_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netrelay.py")
    spec = importlib.util.spec_from_file_location("_tt_netrelay", netrelay_path)
    assert spec is not None and spec.loader is not None
    netrelay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(netrelay)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)

    def connect() -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s

    threading.Thread(target=netrelay._accept_loop, args=(listener, connect), daemon=True).start()


def keeper_main(args: list[str]) -> int:
    """``keeper --socket PATH [--forward PORT=SOCKET]... [tt-cell-keeper]``."""
    path: str | None = None
    forwards: list[tuple[int, str]] = []
    while args and args[0] in ("--socket", "--forward"):
        if args[0] == "--socket":
            path = args[1]
        else:
            port_text, _, sock_path = args[1].partition("=")
            forwards.append((int(port_text), sock_path))
        args = args[2:]
    if path is None:
        print("usage: spawner.py keeper --socket PATH [--forward PORT=SOCKET]...", file=sys.stderr)
        return 2
    threading.Thread(target=_watch_stdin, daemon=True).start()
    for port, target in forwards:
        _forward(port, target)
    Keeper(path).serve()
    return 0


# --------------------------------------------------------------------------- launcher
def _die_with_parent() -> None:
    """SIGTERM this launcher when the process that ran the cell dies (bwrap's
    ``--die-with-parent``, for the docker backend)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the cell's cleanup still ends the container
    if os.getppid() == 1:
        os.kill(os.getpid(), signal.SIGTERM)


def _is_devnull(fd: int) -> bool:
    try:
        mine, null = os.fstat(fd), os.stat("/dev/null")
    except OSError:
        return False
    return stat.S_ISCHR(mine.st_mode) and mine.st_rdev == null.st_rdev


def _pump(src: int, dst: int) -> None:
    """Copy ``src`` to ``dst`` until EOF (a write error drops the rest, as a closed pipe would)."""
    try:
        while True:
            data = os.read(src, 65536)
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(dst, view):]
    except OSError:
        pass
    finally:
        _close(src)


def _stdio(stdin: bool) -> tuple[list[int], list[int], list[threading.Thread]]:
    """The three descriptors to send, ours to close once sent, and the pumps of the pipes put
    in between: a pipe (or ``/dev/null``) goes as it is; anything else — a regular file (the
    runner's stdout/stderr files), a terminal, a socket — behind a pipe, so the process gets
    the stream ``docker exec`` gave it and no handle on a host file."""
    send: list[int] = []
    close: list[int] = []
    pumps: list[threading.Thread] = []
    for fd in (0, 1, 2):
        if fd == 0 and not stdin:
            null = os.open("/dev/null", os.O_RDONLY)
            send.append(null)
            close.append(null)
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:  # closed: the process gets /dev/null there
            null = os.open("/dev/null", os.O_RDWR)
            send.append(null)
            close.append(null)
            continue
        if stat.S_ISFIFO(mode) or _is_devnull(fd):
            send.append(fd)
            continue
        read_end, write_end = os.pipe()
        if fd == 0:
            pump = threading.Thread(target=_pump, args=(0, write_end), daemon=True)
            send.append(read_end)
            close.append(read_end)
        else:
            pump = threading.Thread(target=_pump, args=(read_end, fd), daemon=True)
            send.append(write_end)
            close.append(write_end)
            pumps.append(pump)
        pump.start()
    return send, close, pumps


def _connect(path: str, timeout_s: float) -> socket.socket:
    """Connected to the keeper at ``path``; waits while the socket is not there yet (the
    container is starting); raises ``ConnectionError`` when the keeper is gone."""
    deadline = time.monotonic() + timeout_s
    refused = 0
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except FileNotFoundError:
            sock.close()
            if time.monotonic() > deadline:
                raise ConnectionError(f"the cell's keeper did not start within {timeout_s:.0f} s") from None
            time.sleep(0.005)
        except ConnectionRefusedError:
            sock.close()
            refused += 1
            if refused > 3:  # listening before it is named: a refusal means the keeper ended
                raise ConnectionError("the cell's keeper is gone (its container ended)") from None
            time.sleep(0.01)


def launch(job_path: str) -> int:
    """Run the job's process in its cell's container; its exit code (see the module docstring)."""
    with open(job_path, encoding="utf-8") as fh:
        job = json.load(fh)
    os.unlink(job_path)
    sock: list[socket.socket] = []
    stopping: list[int] = []
    started: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        # A kill request only once the process runs (before, it would garble the request;
        # the process is then not started at all).
        stopping.append(signum)
        if started and len(stopping) == 1:
            _send_kill(sock[0])

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _die_with_parent()
    try:
        sock.append(_connect(job["socket"], float(job.get("start_timeout_s", START_TIMEOUT_S))))
    except OSError as exc:
        print(f"tracetrial docker sandbox: cannot start {job['argv'][0]}: {exc}", file=sys.stderr)
        return SPAWNER_FAILED
    if stopping:
        return 128 + stopping[0]  # ended before the process started: never start it
    send, close, pumps = _stdio(bool(job.get("stdin")))
    try:
        send_request(sock[0], {"argv": job["argv"], "env": job["env"], "cwd": job["cwd"]}, send)
    except OSError as exc:
        print(f"tracetrial docker sandbox: the cell's keeper did not take {job['argv'][0]}: {exc}", file=sys.stderr)
        return SPAWNER_FAILED
    finally:
        for fd in close:
            _close(fd)
    replies = sock[0].makefile("rb")
    answer = _answer(replies)
    if answer is None or "pid" not in answer:
        text = str(answer.get("error", answer)) if answer else "the cell's keeper hung up"
        print(f"tracetrial docker sandbox: {text}", file=sys.stderr)
        code = answer.get("code") if answer else None
        return code if isinstance(code, int) else SPAWNER_FAILED
    started.append(int(answer["pid"]))
    if stopping:  # the signal came while the request was on its way
        _send_kill(sock[0])
    ended = _answer(replies)
    if ended is None or "status" not in ended:
        print(f"tracetrial docker sandbox: the cell's container ended while {job['argv'][0]} ran", file=sys.stderr)
        return SPAWNER_FAILED
    code = os.waitstatus_to_exitcode(int(ended["status"]))
    if job.get("status"):
        try:
            with open(job["status"], "w", encoding="utf-8") as fh:
                fh.write(str(code))
        except OSError:
            pass
    deadline = time.monotonic() + DRAIN_S
    for pump in pumps:
        pump.join(max(deadline - time.monotonic(), 0.0))
    return 128 - code if code < 0 else code


def _send_kill(sock: socket.socket) -> None:
    try:
        sock.sendall(b"kill\n")
    except OSError:
        pass  # the keeper is gone: so is the process


def _answer(replies: Any) -> dict[str, Any] | None:
    """The keeper's next reply line (``None``: it hung up)."""
    line = replies.readline()
    if not line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def run(job_path: str) -> None:
    """Launcher entry point (see :data:`BOOT`): exit with the process's exit code."""
    code = launch(job_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


#: ``python -I -S -c BOOT <this file> <job>``: imports this module from its folder, put last on
#: the path (nothing but the standard library is loaded; no standard module is named like it;
#: its cached bytecode is used) and runs :func:`run`. Not through ``importlib.util``: that
#: alone costs the launcher ~3 ms, of ~15 for everything it does.
BOOT = ("import sys, os; sys.path.append(os.path.dirname(sys.argv[1])); "
        "from spawner import run; run(sys.argv[2])")


def _main(argv: list[str]) -> int:
    if argv[:1] == ["keeper"]:
        return keeper_main(argv[1:])
    print("usage: spawner.py keeper --socket PATH [--forward PORT=SOCKET]... tt-cell-keeper", file=sys.stderr)
    return 2


if __name__ == "__main__":
    os._exit(_main(sys.argv[1:]))


__all__ = [
    "BOOT",
    "DRAIN_S",
    "KEEPER_MARK",
    "MAX_REQUEST",
    "SPAWNER_FAILED",
    "START_TIMEOUT_S",
    "Keeper",
    "keeper_main",
    "launch",
    "recv_request",
    "run",
    "send_request",
]
