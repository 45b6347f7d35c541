"""Run keys and the generated LiteLLM config (pure)."""

from __future__ import annotations

import yaml

from apparatus.gateway.config import build_litellm_config, harness_base_url, run_key, run_of_key
from apparatus.gateway.registry import ModelRegistry


def test_run_keys_round_trip_and_cannot_be_forged() -> None:
    key = run_key("s3cret", "task.a-1+x")
    assert run_of_key("s3cret", key) == "task.a-1+x"
    assert run_of_key("other", key) is None                       # another gateway's key
    forged = key.replace("task.a-1+x", "task.a-2+x")
    assert run_of_key("s3cret", forged) is None
    assert run_of_key("s3cret", "sk-ant-real-key") is None
    assert run_of_key("s3cret", None) is None


def test_config_routes_only_aliases_with_keys_and_never_embeds_a_key() -> None:
    reg = ModelRegistry.load()
    env = {"DEEPSEEK_API_KEY": "sk-deepseek-value-1234"}
    config, live = build_litellm_config(reg, probe_url="http://127.0.0.1:9/", master_key="sk-m", env=env)
    text = yaml.safe_dump(config)
    assert "sk-deepseek-value-1234" not in text
    paths = [e["path"] for e in config["general_settings"]["pass_through_endpoints"]]
    assert paths[0] == "/tt/probe"
    assert config["general_settings"]["pass_through_endpoints"][0]["target"] == "http://127.0.0.1:9"
    assert {p for p in paths if p.startswith("/tt/live/")} == {
        "/tt/live/deepseek-v4-flash/chat", "/tt/live/deepseek-v4-flash/anthropic",
        "/tt/live/deepseek-v4-pro/chat", "/tt/live/deepseek-v4-pro/anthropic"}
    assert set(live) == {"deepseek-v4-flash/chat", "deepseek-v4-flash/anthropic",
                         "deepseek-v4-pro/chat", "deepseek-v4-pro/anthropic"}
    chat_route = next(e for e in config["general_settings"]["pass_through_endpoints"]
                      if e["path"] == "/tt/live/deepseek-v4-pro/chat")
    assert chat_route["headers"] == {"authorization": "Bearer os.environ/DEEPSEEK_API_KEY"}
    anth_route = next(e for e in config["general_settings"]["pass_through_endpoints"]
                      if e["path"] == "/tt/live/deepseek-v4-pro/anthropic")
    assert anth_route["headers"] == {"x-api-key": "os.environ/DEEPSEEK_API_KEY"}
    assert all(e["include_subpath"] and e["auth"] and "HEAD" in e["methods"]
               for e in config["general_settings"]["pass_through_endpoints"])
    assert [m["model_name"] for m in config["model_list"]] == ["deepseek-v4-flash", "deepseek-v4-pro"]
    assert config["model_list"][1]["litellm_params"] == {"model": "deepseek/deepseek-v4-pro",
                                                         "api_key": "os.environ/DEEPSEEK_API_KEY",
                                                         "api_base": "https://api.deepseek.com"}
    assert config["general_settings"]["custom_auth"] == "apparatus.gateway._proxy.authenticate"
    assert config["litellm_settings"]["callbacks"] == "apparatus.gateway._proxy.recorder"


def test_no_probe_url_means_no_probe_route() -> None:
    config, live = build_litellm_config(ModelRegistry.load(), probe_url=None, master_key="sk-m", env={})
    assert config["general_settings"]["pass_through_endpoints"] == [] and live == {}


def test_harness_base_urls() -> None:
    gw = "http://127.0.0.1:4000"
    assert harness_base_url(gw, kind="probe", run_id="r1", alias="probe", wire_format="anthropic") == \
        "http://127.0.0.1:4000/tt/probe/r1"
    assert harness_base_url(gw, kind="probe", run_id="r1", alias="probe", wire_format="responses") == \
        "http://127.0.0.1:4000/tt/probe/r1/v1"
    assert harness_base_url(gw, kind="pass-through", run_id="r1", alias="m", wire_format="chat") == \
        "http://127.0.0.1:4000/tt/live/m/chat/v1"
    assert harness_base_url(gw, kind="translation", run_id="r1", alias="m", wire_format="anthropic") == gw
