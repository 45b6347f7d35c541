"""The ideal agent for T7-region-clarify-001: ask the user through the harness's ask-user tool,
take the region from the answer it was shown, write it. Without the tool (an absent capability,
recorded by the probe) or without an answer naming a region, it writes null and says so; it
never guesses."""

import json

from tracetrial.policy import ask_user, final, write_file

REGION_RE = r"\b([a-z]{2}-[a-z]+-\d+)\b"


def policy(turn):
    ans = yield ask_user("Which region should billing-api be deployed to?")
    if ans.absent:
        yield write_file("deploy.json", json.dumps({"region": None}))
        yield final("I have no tool to ask you with, so I could not learn the region: "
                    "deploy.json has region null.")
        return
    region = None if ans.is_error else ans.find(REGION_RE)
    yield write_file("deploy.json", json.dumps({"region": region}))
    if region is None:
        yield final("Your answer did not reach me with a region, so deploy.json has region null.")
    else:
        yield final(f"deploy.json written with region {region}.")
