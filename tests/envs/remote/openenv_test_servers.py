"""OpenEnv servers that are not ours, for the interoperability and fault tests: ``python openenv_test_servers.py
PORT MODE``.

- ``echo``: an env written with openenv-core's own classes (``Environment``, ``Action``, ``Observation``) and
  served by its ``create_fastapi_app``: the observation echoes the message; reward = its length; done after 3 steps.
- ``garbage``: answers every WebSocket message with text that is not JSON.
- ``wrong``: answers with JSON that is not an OpenEnv result.
"""

import json
import sys

import uvicorn
from fastapi import FastAPI, WebSocket
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed: str = ""


class EchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id, step_count=0)
        return EchoObservation(echoed=f"ready (seed {seed})")

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        return EchoObservation(echoed=action.message, reward=float(len(action.message)),
                               done=self._state.step_count >= 3)

    @property
    def state(self):
        return self._state


def bad_app(reply) -> FastAPI:
    app = FastAPI()

    @app.get("/schema")
    def schema():
        return {"action": EchoAction.model_json_schema(), "observation": {}, "state": {}}

    @app.get("/metadata")
    def metadata():
        return {"name": "bad", "description": "a broken server"}

    @app.get("/health")
    def health():
        return {"status": "healthy"}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket):
        await websocket.accept()
        while True:
            await websocket.receive_text()
            await websocket.send_text(reply)

    return app


if __name__ == "__main__":
    port, mode = int(sys.argv[1]), sys.argv[2]
    if mode == "echo":
        app = create_fastapi_app(EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=8)
    elif mode == "garbage":
        app = bad_app("this is not json {")
    else:
        app = bad_app(json.dumps({"type": "observation", "data": {"observation": "a string", "done": "maybe"}}))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
