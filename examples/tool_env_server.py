"""A tool-using env behind an env server: SearchQA served over OpenEnv's protocol, then trained on by URL.

It starts ``ragen-rllib serve-env SearchQA --port PORT`` (an OpenEnv server on 127.0.0.1), plays one episode
through it with the oracle (search calls in the Hermes ``<tool_call>`` format, the results that come back, the
answer), then, with ``--train N``, trains for N iterations with ``.environment("http://127.0.0.1:PORT")``: the env
runner (a separate process) opens one server session per episode. The agent sees the ``search`` tool the way its
chat template shows tools (Qwen2-style templates render ``tools=``; the tiny model's and SmolLM2's get a text
description), calls it, and gets each result back as a tool message; a bad call is answered with an error
message and costs the format penalty.

Run:  .venv/bin/python examples/tool_env_server.py               # serve, and play one episode with the oracle
      .venv/bin/python examples/tool_env_server.py --train 2     # then 2 RL iterations with the tiny model (~1 min)
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def play(url: str) -> None:
    from ragen_rllib.envs.loading import make_env

    env, oracle = make_env(url), make_env("ragen/SearchQA-v0").unwrapped
    text, _ = env.reset(seed=7)
    oracle.reset(seed=7)
    print(f"tools: {[t.name for t in env.tools]}\n{text}")
    done = False
    while not done:
        action = oracle.oracle_action()
        oracle.step(action)
        text, reward, terminated, truncated, info = env.step(action)
        print(f"> {action}\n{text}\n  reward={reward} success={info['success']}")
        done = terminated or truncated
    env.close()


def train(url: str, iterations: int, model: str) -> None:
    from ragen_rllib import RagenConfig, init_ray

    config = (RagenConfig()
              .environment(url)
              .env_runners(num_env_runners=1)
              .rl_module(model_config={"model": model})
              .training(adv_estimator="grpo", env_groups=2, group_size=2, minibatch_size=4, max_turns=3,
                        max_response_tokens=32, lr=1e-4, engine_kwargs={"max_model_len": 2048},
                        max_model_len=2048))
    config.validate()  # also checks that the server answers
    init_ray(_temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False)
    algo = config.build_algo()
    try:
        for _ in range(iterations):
            r = algo.train()["env_runners"]
            print(f"iter {algo.iteration}: success {r['success_rate']:.0%}, valid turns {r['action_valid_rate']:.0%}, "
                  f"{r['num_episodes']} episodes through the server, runner errors {r.get('runner_errors', 0)}",
                  flush=True)
    finally:
        algo.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=int, default=0, metavar="N", help="train N iterations (0: only play)")
    parser.add_argument("--model", default="tiny:nano", help="model to train (tiny:nano, gguf:smollm2-135m-instruct)")
    parser.add_argument("--port", type=int, default=0, help="server port (0: a free one)")
    args = parser.parse_args()
    from ragen_rllib.run.server_process import served_env

    with served_env("SearchQA", port=args.port) as url:  # ragen-rllib serve-env SearchQA --port PORT
        play(url)
        if args.train:
            train(url, args.train, args.model)


if __name__ == "__main__":
    main()
