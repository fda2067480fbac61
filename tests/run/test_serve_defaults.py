"""The env server's limits are written once (run/server_process.py): the command line and the server take them."""

import inspect

from ragen_rllib.cli import build_parser
from ragen_rllib.run import server_process as S


def test_serve_env_takes_its_limits_from_one_place():
    from ragen_rllib.run import serve_env

    serve_env_cmd = build_parser()._subparsers._group_actions[0].choices["serve-env"]
    flags = {a.dest: a.default for a in serve_env_cmd._actions}
    assert (flags["host"], flags["port"], flags["max_sessions"], flags["session_timeout_s"]) == \
        (S.DEFAULT_HOST, S.DEFAULT_PORT, S.MAX_SESSIONS, S.SESSION_TIMEOUT_S) == ("127.0.0.1", 8000, 64, 600.0)
    serve = inspect.signature(serve_env.serve).parameters
    assert (serve["host"].default, serve["port"].default, serve["max_concurrent_envs"].default,
            serve["session_timeout_s"].default) == (S.DEFAULT_HOST, S.DEFAULT_PORT, S.MAX_SESSIONS, S.SESSION_TIMEOUT_S)
