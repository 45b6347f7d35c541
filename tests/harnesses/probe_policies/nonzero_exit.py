"""Run a build that prints success but exits 3."""

from tracetrial.policy import final, shell


def policy(turn):
    yield shell("python3 build.py")
    yield final("The build printed success but its exit status is what counts.")
