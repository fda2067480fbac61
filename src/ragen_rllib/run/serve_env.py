"""Any registered env as an OpenEnv environment server (``ragen-rllib serve-env ID --port P``).

The server is openenv-core's own (``create_fastapi_app``): its WebSocket session protocol (``/ws``: reset, step,
state, close; one env instance per connection, so one server holds many concurrent episodes), plus ``/health``,
``/schema``, ``/metadata`` and the stateless HTTP ``/reset`` and ``/step``. An episode's env lives as long as its
session; a session idle past ``session_timeout_s`` is reaped. OpenEnv's HTTP ``/step`` makes a new env for each
request, so it has no episode to step: it answers ``409 Conflict`` with a message that names the ``/ws`` session
protocol (:data:`STATELESS_STEP`), not a server error.

The action is :class:`TextAction` (``{"action": "<the env's action string>"}``), the observation
:class:`TextObservation`: the env's text, ``info``, ``truncated`` and, so that a remote agent can build its
prompt, the env's ``instruction``, ``action_names`` and ``tools`` (``tools=`` schemas). Needs the ``openenv``
extra (``pip install 'ragen-rllib[openenv]'``).
"""

from __future__ import annotations

import json
from typing import Any

try:
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
    from pydantic import Field
except ImportError as err:  # pragma: no cover - the message is the point
    raise ImportError("serving envs needs openenv-core: pip install 'ragen-rllib[openenv]'") from err

from ragen_rllib.envs.loading import make_env
from ragen_rllib.run.server_process import DEFAULT_HOST, DEFAULT_PORT, MAX_SESSIONS, SESSION_TIMEOUT_S

#: The answer to a step with no episode (OpenEnv's stateless HTTP ``/step``, or a session that never reset).
STATELESS_STEP = ("no episode to step: OpenEnv's HTTP /reset and /step are stateless (each request gets a new env). "
                  "Play an episode over a WebSocket session at /ws: send reset, then step, in one connection "
                  "(openenv-core's GenericEnvClient and ragen_rllib's ServedEnv do this)")


class EpisodeNotStarted(RuntimeError):
    """A step before any reset in this env instance; the app answers it with 409 (see :data:`STATELESS_STEP`)."""


class TextAction(Action):
    """One action of a text env: an action name (``"Left"``), a tool call or a whole answer."""

    action: str = Field(description="the env's action string")


class TextObservation(Observation):
    """What a text env shows after a reset or a step (``reward`` and ``done`` are OpenEnv's own fields)."""

    text: str = Field(default="", description="the env's text rendering (after a tool call: the tool's result)")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's step info (success, validity, ...)")
    truncated: bool = Field(default=False, description="the episode ended by a step limit")
    instruction: str = Field(default="", description="what the task is")
    action_names: list[str] = Field(default_factory=list, description="the action names ([] for free-form envs)")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="tools the env offers (tools= schemas)")


def _jsonable(value: Any) -> Any:
    """``value`` with anything JSON cannot hold (numpy scalars, sets, ...) turned into plain values or text."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if hasattr(v, "item") else str(v)))


def environment_class(env_id: str, env_config: dict | None = None) -> type[Environment]:
    """An OpenEnv ``Environment`` class whose instances each hold one ``make_env(env_id, env_config)``."""
    config = dict(env_config or {})

    class ServedTextEnv(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True  # every session gets its own env instance

        def __init__(self) -> None:
            super().__init__()
            self.env = make_env(env_id, config)
            self._state = State(step_count=0)
            self._started = False

        def _observation(self, text: str, info: dict, reward: float | None = None, done: bool = False,
                         truncated: bool = False) -> TextObservation:
            base = self.env.unwrapped
            tools = [t.schema() for t in getattr(base, "tools", None) or []]
            return TextObservation(text=str(text), info=_jsonable(info), reward=reward, done=done,
                                   truncated=truncated, instruction=str(getattr(base, "instruction", "")),
                                   action_names=list(getattr(base, "action_names", [])), tools=tools)

        def reset(self, seed: int | None = None, episode_id: str | None = None, options: dict | None = None,
                  **kwargs: Any) -> TextObservation:
            text, info = self.env.reset(seed=seed, options=options)
            self._state = State(episode_id=episode_id, step_count=0)
            self._started = True
            return self._observation(text, info)

        def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
            if not self._started:
                raise EpisodeNotStarted(STATELESS_STEP)
            text, reward, terminated, truncated, info = self.env.step(action.action)
            self._state.step_count += 1
            return self._observation(text, info, float(reward), bool(terminated or truncated), bool(truncated))

        @property
        def state(self) -> State:
            return self._state

        def get_metadata(self) -> EnvironmentMetadata:
            return EnvironmentMetadata(name=env_id, description=str(getattr(self.env.unwrapped, "instruction", "")))

        def close(self) -> None:
            self.env.close()

    ServedTextEnv.__name__ = ServedTextEnv.__qualname__ = f"Served[{env_id}]"
    return ServedTextEnv


def create_app(env_id: str, env_config: dict | None = None, max_concurrent_envs: int = MAX_SESSIONS,
               session_timeout_s: float | None = SESSION_TIMEOUT_S):
    """The FastAPI app serving ``env_id`` (openenv-core's ``create_fastapi_app``); checks the env can be made."""
    from openenv.core.env_server.types import ConcurrencyConfig

    make_env(env_id, env_config).close()  # a bad id or env_config fails here, before the server starts
    concurrency = ConcurrencyConfig(max_concurrent_envs=max_concurrent_envs, session_timeout=session_timeout_s)
    app = create_fastapi_app(environment_class(env_id, env_config), TextAction, TextObservation,
                             concurrency_config=concurrency)
    app.add_middleware(_QuietClientClose)
    app.add_exception_handler(EpisodeNotStarted, _conflict)
    return app


async def _conflict(request, exc: EpisodeNotStarted):
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=409, content={"detail": str(exc)})


class _QuietClientClose:
    """ASGI middleware: a WebSocket session the client closed first ends quietly.

    openenv-core 0.3.0's ``/ws`` handler closes the socket in a ``finally`` that only catches ``RuntimeError``;
    when the client (openenv-core's own ``GenericEnvClient`` included) has already closed it, uvicorn raises a
    disconnect there and logs a traceback for every finished episode. The session is already destroyed by then,
    so nothing is lost by ending quietly."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope.get("type") != "websocket":
                raise


def serve(env_id: str, env_config: dict | None = None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          max_concurrent_envs: int = MAX_SESSIONS, session_timeout_s: float | None = SESSION_TIMEOUT_S) -> None:
    """Serve ``env_id`` until the process is stopped (uvicorn)."""
    import uvicorn

    app = create_app(env_id, env_config, max_concurrent_envs, session_timeout_s)
    uvicorn.run(app, host=host, port=port, log_level="warning")
