"""Envs behind OpenEnv servers, with real server processes: `ragen-rllib serve-env` talks to openenv-core's own
client, our ServedEnv talks to a server built from openenv-core's own classes, a served env equals the env
in-process (tools included), one server holds concurrent sessions, and a server that dies, hangs or answers
garbage ends only the affected episodes, after which the env reconnects to the restarted server."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from ragen_rllib.envs.loading import make_env
from ragen_rllib.envs.remote.served import ServedEnv, ServedEnvError
from ragen_rllib.envs.tools.tool_env import tool_call_action
from ragen_rllib.run.server_process import free_port, serve_env_command, server_process

pytestmark = pytest.mark.slow
FOREIGN = Path(__file__).with_name("openenv_test_servers.py")
LAKE = {"size": 4, "is_slippery": True, "success_rate": 0.8}


@contextlib.contextmanager
def server(cmd: list[str], port: int):
    """A server process with its output piped (the tests read it)."""
    with server_process(cmd, port, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        yield proc


def ours(env: str, port: int, env_config: str = "{}") -> list[str]:
    return serve_env_command(env, port, json.loads(env_config))


def foreign(mode: str, port: int) -> list[str]:
    return [sys.executable, str(FOREIGN), str(port), mode]


def _bfcl(port: int):
    from ragen_rllib.run.server_process import served_env

    return served_env("ragen/BFCLMultiTurn-v0", {"split": "validation"}, port=port)


# test name -> {key: (port -> the context manager of a server the test plays against)}: `servers` starts them
# all at once, with the module (each start-up is mostly a single-core Python import)
SERVERS = {
    "test_serve_env_speaks_openenv_to_openenv_cores_own_client": {
        "lake": lambda port: server(ours("FrozenLake", port, '{"size": 4, "is_slippery": true, "success_rate": 0.8}'),
                                    port)},
    "test_a_served_tool_env_equals_the_env_in_process_and_sessions_are_concurrent": {
        "searchqa": lambda port: server(ours("SearchQA", port), port)},
    "test_servedenv_plays_an_env_built_on_openenv_cores_own_server_classes": {
        "echo": lambda port: server(foreign("echo", port), port)},
    "test_a_server_that_dies_hangs_or_answers_garbage_ends_the_episode_and_the_env_reconnects": {
        "dies": lambda port: server(ours("FrozenLake", port), port),
        "garbage": lambda port: server(foreign("garbage", port), port),
        "wrong": lambda port: server(foreign("wrong", port), port)},
    "test_bfcl_through_its_server_equals_the_env_in_process": {"bfcl": _bfcl},
}


class Servers:
    """Servers started together, each from its own thread; :meth:`use` hands one to a test (as ``with`` on its
    context manager would: the same value, or the same start-up error) and stops it when the test's block ends."""

    def __init__(self, makers: dict) -> None:
        ports: set[int] = set()
        while len(ports) < len(makers):  # distinct free ports
            ports.add(free_port())
        self.ports = dict(zip(makers, sorted(ports)))
        self.cms = {key: make(self.ports[key]) for key, make in makers.items()}
        self.pool = ThreadPoolExecutor(max(1, len(self.cms)))
        self.entered = {key: self.pool.submit(cm.__enter__) for key, cm in self.cms.items()}

    @contextlib.contextmanager
    def use(self, key: str):
        """``(what the server's context manager yields, its port)``."""
        value = self.entered[key].result()
        with contextlib.ExitStack() as stack:
            stack.push(self.cms.pop(key))  # its __exit__ runs at the block's end, with the block's exception
            yield value, self.ports[key]

    def close(self) -> None:
        for key, cm in self.cms.items():  # those no test used (a test failed before its turn)
            if self.entered[key].exception() is None:
                cm.__exit__(None, None, None)
        self.pool.shutdown()


@pytest.fixture(scope="module", autouse=True)
def servers(request):
    makers = {key: make for item in request.session.items if item.module.__name__ == __name__
              for key, make in SERVERS.get(item.function.__name__, {}).items()}
    started = Servers(makers)
    yield started
    started.close()


def test_serve_env_speaks_openenv_to_openenv_cores_own_client(servers):
    from openenv.core.generic_client import GenericEnvClient

    local = make_env("ragen/FrozenLake-v0", LAKE)
    with servers.use("lake") as (_, port):  # ours("FrozenLake", port, '{"size": 4, "is_slippery": true, ...}')
        from ragen_rllib import RagenConfig

        RagenConfig().environment(f"http://127.0.0.1:{port}").validate()  # the config check finds it up
        schema = requests.get(f"http://127.0.0.1:{port}/schema", timeout=5).json()
        assert set(schema["action"]["properties"]) >= {"action"}
        with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as client:
            first = client.reset(seed=11)
            text, _ = local.reset(seed=11)
            assert first.observation["text"] == text and first.done is False
            assert first.observation["action_names"] == ["Left", "Down", "Right", "Up"]
            for action in ["Down", "Right", "Down", "Right", "Down", "Right"]:
                got = client.step({"action": action})
                text, reward, term, trunc, info = local.step(action)
                assert (got.observation["text"], got.reward, got.done, got.observation["info"]) == \
                    (text, reward, term or trunc, info)
                if got.done:
                    break
        # a plain HTTP client: /reset works, /step has no episode to step and says how to play one (not a 500)
        assert requests.post(f"http://127.0.0.1:{port}/reset", json={"seed": 11}, timeout=5).status_code == 200
        answer = requests.post(f"http://127.0.0.1:{port}/step", json={"action": {"action": "Right"}}, timeout=5)
        assert answer.status_code == 409 and "/ws" in answer.json()["detail"], answer.text
        bad = requests.post(f"http://127.0.0.1:{port}/step", json={"action": {"wrong": 1}}, timeout=5)
        assert bad.status_code == 422, bad.text  # openenv-core's own check of the action's shape
        with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as client:  # the server still serves
            assert client.reset(seed=11).observation["text"] == local.reset(seed=11)[0]


def test_a_served_tool_env_equals_the_env_in_process_and_sessions_are_concurrent(servers):
    with servers.use("searchqa") as (proc, port):  # ours("SearchQA", port)
        url = f"http://127.0.0.1:{port}"

        def play(seed):
            remote, local = make_env(url, {"message_timeout_s": 30}), make_env("ragen/SearchQA-v0")
            assert isinstance(remote, ServedEnv)
            out = [(remote.reset(seed=seed), local.reset(seed=seed))]
            assert [t.name for t in remote.tools] == ["search"] and remote.instruction == local.unwrapped.instruction
            for action in [tool_call_action("search", {"query": local.unwrapped.question.searches[0]}),
                           '<tool_call>{"name": "search", "arguments": {"query": 1}}</tool_call>',
                           local.unwrapped.question.answer]:
                out.append((remote.step(action), local.step(action)))
            remote.close()
            return out

        with ThreadPoolExecutor(8) as pool:  # 8 episodes at once on one server, each its own session
            results = list(pool.map(play, range(8)))
    for pairs in results:
        for remote, local in pairs:
            assert remote == local
        assert pairs[-1][0][1] == 1.0 and pairs[2][0][0].startswith("Error: bad arguments")
    assert len({pairs[0][0][0] for pairs in results}) > 1  # different seeds, different questions
    assert "Traceback" not in proc.stdout.read().decode()  # sessions the client closed end quietly


def test_servedenv_plays_an_env_built_on_openenv_cores_own_server_classes(servers):
    with servers.use("echo") as (_, port):  # foreign("echo", port)
        env = make_env(f"http://127.0.0.1:{port}")
        text, info = env.reset(seed=5)
        assert text == "ready (seed 5)" and info["success"] is False
        assert env.instruction  # from /metadata
        assert env.step("hello") == ("hello", 5.0, False, False,
                                     {"success": False, "action_is_valid": True, "action_is_effective": True})
        assert env.step("hi")[0] == "hi"
        text, reward, term, trunc, info = env.step("bye")
        assert (text, reward, term, trunc, info["success"]) == ("bye", 3.0, True, False, True)


def test_a_server_that_dies_hangs_or_answers_garbage_ends_the_episode_and_the_env_reconnects(servers):
    port = servers.ports["dies"]
    env = ServedEnv(f"http://127.0.0.1:{port}", connect_timeout_s=2, message_timeout_s=1.5)
    with servers.use("dies") as (proc, _):  # ours("FrozenLake", port)
        env.reset(seed=0)
        env.step("Left")
        os.killpg(proc.pid, signal.SIGSTOP)  # hangs
        start = time.monotonic()
        with pytest.raises(ServedEnvError, match="step failed"):
            env.step("Left")
        assert time.monotonic() - start < 5
        os.killpg(proc.pid, signal.SIGCONT)
        env.reset(seed=0)  # a new session on the same, recovered, server
        os.killpg(proc.pid, signal.SIGKILL)  # dies
        proc.wait()
        with pytest.raises(ServedEnvError, match="step failed"):
            env.step("Left")
        with pytest.raises(ServedEnvError):
            env.reset(seed=1)  # still down: the next episode fails too, quickly
    with server(ours("FrozenLake", port), port):  # back on the same port: the env reconnects
        text, _ = env.reset(seed=0)
        assert text == make_env("ragen/FrozenLake-v0").reset(seed=0)[0]
        assert env.step("Left")[4]["action_is_valid"]
    for mode, match in (("garbage", "reset failed: JSONDecodeError"), ("wrong", "not an OpenEnv result")):
        with servers.use(mode) as (_, port):  # foreign(mode, port)
            with pytest.raises(ServedEnvError, match=match):
                ServedEnv(f"http://127.0.0.1:{port}", message_timeout_s=2).reset(seed=0)


def test_a_dead_server_fails_only_its_episodes_in_a_rollout():
    """The rollout loop (tiny model, HF engine): episodes on a dead server end as env errors; the in-process ones
    finish."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragen_rllib.agent.chat_format import ChatFormat
    from ragen_rllib.agent.config import AgentConfig
    from ragen_rllib.agent.prompts import generation_prefill
    from ragen_rllib.agent.rollout import rollout
    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.engines.hf_engine import HFEngine
    from ragen_rllib.models.tiny import tiny_model_path

    tok = AutoTokenizer.from_pretrained(tiny_model_path("nano"))
    engine = HFEngine(AutoModelForCausalLM.from_pretrained(tiny_model_path("nano")), tok)
    port = free_port()
    cfg = AgentConfig(max_turns=2, max_response_tokens=16, max_model_len=1024)
    chat = ChatFormat(tok, prefill=generation_prefill(cfg))
    dead = [ServedEnv(f"http://127.0.0.1:{port}", connect_timeout_s=1) for _ in range(2)]
    alive = [make_env("ragen/FrozenLake-v0") for _ in range(2)]
    episodes = rollout(engine, chat, [*dead, *alive], [0, 1, 2, 3], cfg, SamplingConfig(seed=0))
    assert [ep.error is not None for ep in episodes] == [True, True, False, False]
    assert episodes[0].error.startswith("ServedEnvError") and "Connection refused" in episodes[0].error
    assert all(ep.turns for ep in episodes[2:])


def test_bad_settings_name_the_key():
    with pytest.raises(ValueError, match=r"env_config\['url'\] = 'localhost:8000' is invalid"):
        ServedEnv("localhost:8000")
    with pytest.raises(ValueError, match=r"env_config\['message_timeout_s'\] = 0 is invalid"):
        make_env("http://127.0.0.1:1", {"message_timeout_s": 0})


def test_a_config_naming_a_server_that_is_not_up_is_refused_before_any_runner():
    from ragen_rllib import RagenConfig

    port = free_port()
    config = RagenConfig().environment(f"http://127.0.0.1:{port}", env_config={"connect_timeout_s": 1})
    with pytest.raises(ValueError, match=f"env 'http://127.0.0.1:{port}': no env server answers there.*serve-env"):
        config.validate()


def test_bfcl_through_its_server_equals_the_env_in_process(servers):
    """Per-entry tools travel with the observations: BFCL's oracle episode gives the same steps served."""
    with servers.use("bfcl") as (url, _):  # served_env("ragen/BFCLMultiTurn-v0", {"split": "validation"})
        remote, local = make_env(url), make_env("ragen/BFCLMultiTurn-v0", {"split": "validation"})
        assert remote.reset(seed=3) == local.reset(seed=3)
        assert [t.name for t in remote.tools] == [t.name for t in local.unwrapped.tools]
        done = False
        while not done:
            action = local.unwrapped.oracle_action()
            got, want = remote.step(action), local.step(action)
            assert got == want
            done = want[2] or want[3]
        assert want[4]["success"]
        remote.close()
