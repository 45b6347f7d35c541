"""Work off a cell's critical path, done while the apparatus waits on a harness.

A finished cell leaves work that nothing waits for: ending its docker container (the
engine's teardown), deleting its scratch (a harness's HOME), starting a container and a
verifier process for cells to come. Done at once, it runs while the cell is collected,
normalized, sealed and scored — single-threaded apparatus work that, on a two-core machine,
it slows (the engine's teardown and start of a container alone cost ~0.2 s of CPU). So
:func:`later` queues it and one background thread per process runs it when the apparatus
next has nothing to do: when a cell starts waiting on its harness (:func:`idle`, called by
the cell runner), or once it has waited :data:`MAX_WAIT_S` (no cell follows: a session's
last cell, a command that runs none). It runs in order; a failure is swallowed — the work is
only a head start or a tidy-up. What is still queued when the process exits is left to what
its owner relies on anyway: a container ends with the process that holds its keeper's
attach, a scratch folder goes with the session folder (:mod:`apparatus.tempstate`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

__all__ = ["MAX_WAIT_S", "flush", "idle", "later"]

Work = Callable[[], object]

#: The longest queued work waits for an :func:`idle` before it runs anyway.
MAX_WAIT_S = 2.0

_COND = threading.Condition()
#: ``(sequence number, when queued, work)``, in order.
_QUEUE: list[tuple[int, float, Work]] = []
_SEQ = 0
#: Work numbered below this may run (everything queued before the last :func:`idle`).
_RELEASED = 0
#: How many pieces of work have run (or failed).
_FINISHED = 0
#: The pid whose worker thread runs the queue (a forked child starts its own).
_WORKER_PID: int | None = None


def later(work: Work) -> None:
    """Run ``work`` in the background when the apparatus next waits on a harness
    (:func:`idle`), or after :data:`MAX_WAIT_S` at most."""
    global _SEQ, _RELEASED, _FINISHED, _WORKER_PID
    with _COND:
        if _WORKER_PID != os.getpid():
            _QUEUE.clear()  # a forked child's copy of its parent's queue is not its work
            _SEQ = _RELEASED = _FINISHED = 0
            _WORKER_PID = os.getpid()
            threading.Thread(target=_work, name="tt-background", daemon=True).start()
        _QUEUE.append((_SEQ, time.monotonic(), work))
        _SEQ += 1
        _COND.notify_all()


def idle() -> None:
    """The apparatus now waits on a harness: what is queued may run."""
    global _RELEASED
    with _COND:
        _RELEASED = _SEQ
        _COND.notify_all()


def flush(timeout_s: float = 30.0) -> bool:
    """Release everything queued and wait until it has run; whether it did within ``timeout_s``
    (for tests, and for whoever must see the work done)."""
    idle()
    deadline = time.monotonic() + timeout_s
    with _COND:
        while _FINISHED < _SEQ and _WORKER_PID == os.getpid():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _COND.wait(left)
    return True


def _work() -> None:
    global _FINISHED
    while True:
        with _COND:
            while True:
                if _QUEUE:
                    seq, queued, work = _QUEUE[0]
                    wait = queued + MAX_WAIT_S - time.monotonic()
                    if seq < _RELEASED or wait <= 0:
                        _QUEUE.pop(0)
                        break
                    _COND.wait(wait)
                else:
                    _COND.wait()
        try:
            work()
        except Exception:  # noqa: BLE001, S110 - background work is only a head start or a tidy-up
            pass
        with _COND:
            _FINISHED += 1
            _COND.notify_all()
