"""Read a file with the shell, then answer."""

from tracetrial.policy import final, shell


def policy(turn):
    yield shell("cat notes.txt")
    yield final("notes.txt lists alpha and beta.")
