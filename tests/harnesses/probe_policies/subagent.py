"""Delegate a shell command to a sub-agent and report what it said."""

from tracetrial.policy import final, shell, spawn_subagent


def policy(turn):
    yield spawn_subagent("say hi", "Run echo hi and report.")
    yield final("The helper was asked to print hi.")
    yield final("The helper printed hi.")


def subagent_policy(turn):
    yield shell("echo hi")
    yield final("hi printed")
