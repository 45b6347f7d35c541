"""Turn 1 writes a file; turn 2 is Claude Code's manual ``/compact``; turn 3 reads the file."""

from tracetrial.policy import final, shell


def policy(turn):
    if turn.index == 1:
        yield shell("echo one > a.txt")
        yield final("Wrote one.")
    elif turn.index == 2:
        yield final("Nothing to do.")
    else:
        yield shell("cat a.txt")
        yield final("a.txt has one.")


def compaction_summary(turn):
    return "The user asked to write one to a.txt; it was written."
