"""Delegate to a background sub-agent; answer again when its completion notification arrives."""

from tracetrial.policy import final, shell, spawn_subagent


def policy(turn):
    yield spawn_subagent("say hi", "Run echo hi and report.", background=True)
    yield final("Waiting for the helper.")
    yield final("The helper printed hi.")


def subagent_policy(turn):
    yield shell("echo hi")
    yield final("hi printed")
