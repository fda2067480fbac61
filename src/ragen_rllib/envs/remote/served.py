"""An env that lives behind an OpenEnv server: ``.environment("http://127.0.0.1:8000")``.

:class:`ServedEnv` is a gymnasium env whose ``reset`` and ``step`` go to an OpenEnv server over its WebSocket
session protocol, through openenv-core's own client (``GenericEnvClient``). Each episode is one session: a
``reset`` opens a fresh connection (and closes the last one), so an env runner picks a restarted server up at
its next episode.

Two kinds of server:

- this project's (``ragen-rllib serve-env``): the action is the action string, the observation carries the
  text, ``info``, the instruction, the action names and the tools, so the agent sees exactly what the env would
  show in-process;
- any other OpenEnv server: the action is built from the agent's answer: the text itself when the server's
  action schema has one required string field, else the answer read as a JSON object (an answer that is not one
  is an invalid action, never sent). The observation's text is its only string field, else the observation as
  JSON; the instruction is the server's ``/metadata`` description; success is a positive reward at the end.

Faults end the episode, never the runner: a server that is down, closes the connection, answers past
``message_timeout_s`` or sends something that is not an OpenEnv result raises :class:`ServedEnvError`, which the
rollout loop records as that episode's env error (counted in ``runner_errors``). Needs the ``openenv`` extra.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import gymnasium as gym

from ragen_rllib.envs.base import (
    ACTION_IS_EFFECTIVE,
    ACTION_IS_VALID,
    MAX_ACTION_CHARS,
    SUCCESS,
    coerce_action,
    require,
    text_space,
)
from ragen_rllib.envs.tools.tool_env import Tool

URL_SCHEMES = ("http://", "https://", "ws://", "wss://")
#: The action field of this project's servers (TextAction).
OUR_ACTION_FIELD = "action"


class ServedEnvError(RuntimeError):
    """The env server failed (down, hung, closed the session or answered garbage); the episode ends."""


def is_url(env: object) -> bool:
    return isinstance(env, str) and env.lower().startswith(URL_SCHEMES)


class ServedEnv(gym.Env[str, str]):
    """See the module docstring.

    Args:
        url: the server's address (``http://127.0.0.1:8000``; ``ws://`` works too).
        connect_timeout_s: seconds to open a session.
        message_timeout_s: seconds to wait for one reset or step result.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, url: str, connect_timeout_s: float = 10.0, message_timeout_s: float = 60.0,
                 render_mode: str | None = "ansi") -> None:
        require(is_url(url), "url", url, f"an address starting with one of {URL_SCHEMES}")
        for key, value in (("connect_timeout_s", connect_timeout_s), ("message_timeout_s", message_timeout_s)):
            require(isinstance(value, (int, float)) and value > 0, key, value, "a positive number of seconds")
        super().__init__()
        self.url, self.render_mode = url.rstrip("/"), render_mode
        self.connect_timeout_s, self.message_timeout_s = float(connect_timeout_s), float(message_timeout_s)
        self.observation_space, self.action_space = text_space(), text_space(MAX_ACTION_CHARS)
        self._client = None
        self._action_field: str | None = None  # None until the schema is read; "" = JSON-object actions
        self.instruction, self.action_names, self.tools = "", [], []
        self._text, self._ours = "", False

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.close()
        if self._action_field is None:
            self._read_server_description()
        from openenv.core.generic_client import GenericEnvClient

        self._client = GenericEnvClient(base_url=self.url, connect_timeout_s=self.connect_timeout_s,
                                        message_timeout_s=self.message_timeout_s).sync()
        data: dict[str, Any] = {} if seed is None else {"seed": int(seed)}
        if options:
            data["options"] = options
        text, _, _, _, info = self._read(self._call("reset", lambda: self._client.reset(**data)))
        return text, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        if self._client is None:
            raise ServedEnvError(f"{self.url}: step() before reset() (or after the session failed)")
        payload = self._payload(action)
        if payload is None:  # not sendable: invalid, state unchanged
            return self._text, 0.0, False, False, {SUCCESS: False, ACTION_IS_VALID: False, ACTION_IS_EFFECTIVE: False}
        return self._read(self._call("step", lambda: self._client.step(payload)))

    def render(self) -> str:
        return self._text

    def close(self) -> None:
        """End the session. The close handshake runs in the background: a hung server would hold it for the
        WebSocket close timeout (10 s), and nothing waits for its answer."""
        client, self._client = self._client, None
        if client is not None:
            threading.Thread(target=_close_quietly, args=(client,), name="served-env-close", daemon=True).start()

    # ------------------------------------------------------------------ protocol
    def _read_server_description(self) -> None:
        """The action field (from ``/schema``) and the instruction (from ``/metadata``)."""
        import requests

        try:
            schema = requests.get(f"{_http(self.url)}/schema", timeout=self.connect_timeout_s).json()["action"]
            meta = requests.get(f"{_http(self.url)}/metadata", timeout=self.connect_timeout_s).json()
        except Exception as err:
            raise ServedEnvError(f"{self.url}: cannot read the server's /schema and /metadata: {err}") from err
        props = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
        required = [k for k in schema.get("required", []) if k != "metadata"]
        self._ours = set(props) == {OUR_ACTION_FIELD}
        strings = [k for k in required if props.get(k, {}).get("type") == "string"]
        self._action_field = strings[0] if len(required) == 1 and strings else ""
        self.instruction = str(meta.get("description", "")) if isinstance(meta, dict) else ""

    def _payload(self, action: Any) -> dict | None:
        text = coerce_action(action)
        if text is None:
            return None
        if self._action_field:
            return {self._action_field: text}
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return None
        return value if isinstance(value, dict) else None

    def _call(self, what: str, fn):
        try:
            return fn()
        except Exception as err:  # connection refused/closed, timeout, server error, a reply that is not JSON
            self.close()
            raise ServedEnvError(f"{self.url}: {what} failed: {type(err).__name__}: {str(err)[:300]}") from err

    def _read(self, result) -> tuple[str, float, bool, bool, dict]:
        obs, reward, done = getattr(result, "observation", None), getattr(result, "reward", None), \
            getattr(result, "done", None)
        if not isinstance(obs, dict) or not isinstance(done, bool) or not (
                reward is None or (isinstance(reward, (int, float)) and not isinstance(reward, bool))):
            self.close()
            raise ServedEnvError(f"{self.url}: the server's reply is not an OpenEnv result: {str(result)[:300]}")
        reward = float(reward or 0.0)
        if self._ours:
            self._text = str(obs.get("text", ""))
            self.instruction = str(obs.get("instruction", self.instruction))
            self.action_names = [str(a) for a in obs.get("action_names", [])]
            self.tools = [_tool(t) for t in obs.get("tools", [])]
            info = dict(obs.get("info") or {})
            truncated = bool(obs.get("truncated", False))
        else:
            strings = [v for v in obs.values() if isinstance(v, str)]
            self._text = strings[0] if len(strings) == 1 else json.dumps(obs, default=str)
            info = {SUCCESS: bool(done and reward > 0)}
            truncated = False
        info.setdefault(SUCCESS, False)
        info.setdefault(ACTION_IS_VALID, True)
        info.setdefault(ACTION_IS_EFFECTIVE, True)
        terminated = done and not truncated
        return self._text, reward, terminated, truncated, info


def check_server(url: str, env_config: dict | None = None) -> None:
    """ValueError naming the URL and the fix unless an OpenEnv server answers ``/health`` there (checked on the
    driver before any env runner starts)."""
    import requests

    timeout = float((env_config or {}).get("connect_timeout_s", 10.0))
    try:
        requests.get(f"{_http(url.rstrip('/'))}/health", timeout=timeout).raise_for_status()
    except Exception as err:
        raise ValueError(f"env {url!r}: no env server answers there ({type(err).__name__}); start one first, e.g. "
                         "`ragen-rllib serve-env ragen/FrozenLake-v0 --port 8000` for env='http://127.0.0.1:8000'") \
            from None


def _close_quietly(client) -> None:
    try:
        client.close()
    except Exception:  # a dead server: nothing left to close
        pass


def _http(url: str) -> str:
    return "http" + url[2:] if url.lower().startswith("ws") else url


def _tool(schema: dict) -> Tool:
    fn = schema.get("function", schema) if isinstance(schema, dict) else {}
    return Tool(name=str(fn.get("name", "")), description=str(fn.get("description", "")),
                parameters=fn.get("parameters") or {"type": "object", "properties": {}})
