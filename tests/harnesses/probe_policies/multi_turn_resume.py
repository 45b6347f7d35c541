"""Three user turns: write, append (native resume), show (new session, workspace kept)."""

from tracetrial.policy import final, shell

STEPS = {
    1: ("echo one > a.txt", "Wrote one."),
    2: ("echo two >> a.txt", "Appended two."),
    3: ("cat a.txt", "a.txt has one and two."),
}


def policy(turn):
    command, answer = STEPS[turn.index]
    yield shell(command)
    yield final(answer)
