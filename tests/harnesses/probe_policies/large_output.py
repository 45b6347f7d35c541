"""Two large outputs: one from a successful command, one from a failing one."""

from tracetrial.policy import final, shell


def policy(turn):
    yield shell("seq 1 20000")
    yield shell("seq 1 20000; exit 2")
    yield final("Both sequences printed; the second command exited 2.")
