"""The ``ragen-rllib`` console command.

Subcommands:
  train       train from a config file (configs/...), with checkpoints and a learning curve
  sweep       a Tune experiment from a config's tune section (slip-rate study, ASHA, PBT)
  report      sweeps' records as one rows x columns table and figure (RAGEN's main table)
  plan        one trial's resources (each runner and learner) and how many trials a cluster runs at once
  eval        evaluate a checkpoint or a model on fixed seeds: success, pass@k, readable trajectories (JSONL)
  export      save a checkpoint's policy as a Hugging Face model directory
  view        render rollouts (eval's JSONL) as one self-contained HTML page
  play-envs   play every built-in environment with its oracle and a random policy (no LLM, no RL; seconds)
  envs        list the registered environments with their config keys and defaults
  make-model  build a tiny model or bring a pretrained one (GGUF file, gguf:smollm2-135m-instruct, HF),
              optionally warm-started on oracle demonstrations
"""

from __future__ import annotations

import argparse
import sys


def _resumed_overrides(args: argparse.Namespace) -> list[str]:
    """The overrides of a ``--resume``: argparse takes the first one for CONFIG (both are positional), so it goes
    back in front; a CONFIG file is refused, since a resumed run keeps the settings it started with."""
    if args.resume is None or args.config is None:
        return args.overrides
    if "=" not in args.config:
        raise ValueError(f"--resume {args.resume} continues the run with its own config.yaml, so CONFIG "
                         f"{args.config!r} is not read: drop it, and give changes as section.key=value overrides")
    return [args.config, *args.overrides]


def _cmd_train(args: argparse.Namespace) -> int:
    from ragen_rllib.run.train import train

    run_dir = train(None if args.resume else args.config, _resumed_overrides(args), resume=args.resume)
    print(f"run saved to {run_dir}")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ragen_rllib.sweep.run import sweep

    sweep(None if args.resume else args.config, _resumed_overrides(args), resume=args.resume)
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from ragen_rllib.sweep.plan import plan

    return plan(args.config, args.overrides, cluster=args.cluster)


def _cmd_report(args: argparse.Namespace) -> int:
    from ragen_rllib.sweep.report import report

    report(args.sweeps, rows=args.rows, cols=args.cols, out=args.out)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    import json

    from ragen_rllib.evaluation.evaluate import evaluate_run

    report = evaluate_run(args.model, args.config, args.overrides, episodes=args.episodes, samples=args.k,
                          engine=args.engine, out_jsonl=args.out)
    print(json.dumps(report, indent=2))
    if args.out:
        print(f"trajectories written to {args.out}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from ragen_rllib.evaluation.evaluate import export_checkpoint

    print(f"model saved to {export_checkpoint(args.checkpoint, args.out, args.module)}")
    return 0


def _cmd_view(args: argparse.Namespace) -> int:
    from ragen_rllib.evaluation.viewer import write_view

    out = args.out or str(args.rollouts).rsplit(".", 1)[0] + ".html"
    print(f"page written to {write_view(args.rollouts, out, title=args.title)}")
    return 0


def _cmd_play_envs(args: argparse.Namespace) -> int:
    from ragen_rllib.recipes.env_demo import run_env_demo

    run_env_demo(episodes=args.episodes, seed=args.seed)
    return 0


def _cmd_envs(args: argparse.Namespace) -> int:
    from ragen_rllib.envs.catalog import describe_envs

    print(describe_envs())
    return 0


def _cmd_serve_env(args: argparse.Namespace) -> int:
    import json

    try:
        env_config = json.loads(args.env_config)
    except json.JSONDecodeError as err:
        raise ValueError(f"--env-config {args.env_config!r} is not JSON ({err}); e.g. --env-config "
                         "'{\"size\": 4}'") from None
    if not isinstance(env_config, dict):
        raise ValueError(f"--env-config {args.env_config!r} must be a JSON object, e.g. '{{\"size\": 4}}'")
    from ragen_rllib.envs.loading import resolve_env_name
    from ragen_rllib.run.serve_env import serve

    env, settings = resolve_env_name(args.env)
    env_config = {**settings, **env_config}
    print(f"serving {env} (env_config {env_config}) on http://{args.host}:{args.port} (OpenEnv: /ws sessions, "
          "/health, /schema)", flush=True)
    serve(env, env_config, host=args.host, port=args.port, max_concurrent_envs=args.max_sessions,
          session_timeout_s=args.session_timeout_s)
    return 0


def _cmd_make_model(args: argparse.Namespace) -> int:
    from ragen_rllib.models.make_model import make_model

    envs = [e.strip() for e in args.warm_start.split(",") if e.strip()]
    make_model(args.out, preset=args.preset, model=args.model, from_gguf=args.from_gguf, seed=args.seed,
               warm_start_envs=envs, episodes=args.episodes, epochs=args.epochs, noise=args.noise,
               eval_episodes=args.eval_episodes, eval_env=args.eval_env, autocast=args.autocast, lr=args.lr,
               batch_size=args.batch_size, agent=_key_values(args.agent, "--agent"), evaluate=not args.no_eval)
    return 0


def _key_values(items: list[str], flag: str) -> dict:
    """``["enable_think=false", "max_turns=3"]`` -> typed values (YAML scalars), or a ValueError naming the item."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} {item!r} is not KEY=VALUE (e.g. {flag} enable_think=false)")
        out[key.strip()] = yaml.safe_load(value)
    return out


def build_parser() -> argparse.ArgumentParser:
    from ragen_rllib.engines.factory import BACKENDS
    from ragen_rllib.run import server_process as S

    parser = argparse.ArgumentParser(prog="ragen-rllib", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train from a config file (RagenConfig.from_yaml)",
                           description="Train from a YAML config: one progress line per iteration, RLlib "
                           "checkpoints every run.checkpoint_every iterations and at the end, the resolved config, "
                           "progress.jsonl and learning_curve.png under run.out_dir.")
    train.add_argument("config", nargs="?", help="a YAML config, e.g. configs/runs/frozenlake_grpo_cpu.yaml")
    train.add_argument("overrides", nargs="*", metavar="section.key=value",
                       help="dotlist overrides, e.g. training.lr=1e-5 run.stop.training_iteration=50")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    train.set_defaults(func=_cmd_train)
    sw = sub.add_parser("sweep", help="a Tune experiment from a config's tune section (grid, ASHA, PBT)",
                        description="Run one Tune trial per point of the config's tune.param_space (grid_search and "
                        "distributions in YAML; a scheduler from tune.scheduler), then write sweep.json, sweep.md "
                        "and sweep.png under run.out_dir. --resume continues a killed sweep.")
    sw.add_argument("config", nargs="?", help="a YAML config with a tune section, e.g. "
                    "configs/sweeps/frozenlake_slip_rate.yaml")
    sw.add_argument("overrides", nargs="*", metavar="section.key=value", help="dotlist overrides")
    sw.add_argument("--resume", metavar="SWEEP_DIR", help="continue a sweep (finished trials are kept)")
    sw.set_defaults(func=_cmd_sweep)
    pl = sub.add_parser("plan", help="one trial's CPUs, GPUs and custom resources, and how many trials a cluster "
                        "runs at once", description="Print the resources of each runner and learner of one trial "
                        "(RLlib's placement group; a sweep's first point), the trial's total, and how many trials "
                        "run at once on --cluster, on the connected Ray (run.ray_init.address or RAY_ADDRESS) or on "
                        "this machine. Exits 2 with the fix when one trial fits no node.")
    pl.add_argument("config", help="a YAML config (run or sweep)")
    pl.add_argument("overrides", nargs="*", metavar="section.key=value", help="dotlist overrides")
    pl.add_argument("--cluster", metavar="SPEC", help='e.g. "2 nodes x 8 CPUs, 1 GPU" (groups joined by ";", '
                    "custom resources as name=amount)")
    pl.set_defaults(func=_cmd_plan)
    rp = sub.add_parser("report", help="sweeps' trial records as one rows x columns table (RAGEN's main table)",
                        description="Read sweep.json of each SWEEP_DIR and write report.md and report.png: one row "
                        "per --rows value, one column per --cols value (default: the first two swept keys), each "
                        "cell the mean +- std of validation success over its trials (seeds pooled), with the lift.")
    rp.add_argument("sweeps", nargs="+", metavar="SWEEP_DIR", help="sweep directories (or their sweep.json)")
    rp.add_argument("--rows", metavar="KEY", help="a swept key, e.g. variant or training.adv_estimator")
    rp.add_argument("--cols", metavar="KEY", help="a swept key, e.g. environment.env")
    rp.add_argument("--out", metavar="DIR", help="where report.md / report.png go (default: the first sweep)")
    rp.set_defaults(func=_cmd_report)
    ev = sub.add_parser("eval", help="evaluate a checkpoint or model on fixed seeds (success, pass@k, JSONL)",
                        description="Roll out a Ragen checkpoint or a Hugging Face model on fixed seeds (val_seed on, "
                        "or each validation tag's seed) at the config's validation temperature, on the config's "
                        "validation envs (environment.val_env_tags, else its training envs); print success, "
                        "return, valid-action rate and unbiased pass@k for every k <= --k per env; optionally write "
                        "one JSON line per trajectory.")
    ev.add_argument("model", help="a checkpoint directory (Algorithm.save_to_path) or a model id / directory")
    ev.add_argument("--config", required=True, help="a YAML config naming the env and agent settings")
    ev.add_argument("overrides", nargs="*", metavar="section.key=value", help="dotlist overrides of the config")
    ev.add_argument("--episodes", type=int, default=16, help="fixed seeds per env")
    ev.add_argument("--k", type=int, default=1, help="samples per seed (pass@1..k)")
    ev.add_argument("--out", default=None, help="write the trajectories here (JSONL)")
    ev.add_argument("--engine", choices=BACKENDS, default="auto")
    ev.set_defaults(func=_cmd_eval)
    ex = sub.add_parser("export", help="save a checkpoint's policy as a Hugging Face model directory",
                        description="Write the checkpoint's policy (LoRA merged) and its tokenizer as a Hugging Face "
                        "model directory, loadable by AutoModelForCausalLM and by vLLM.")
    ex.add_argument("checkpoint", help="a checkpoint directory (Algorithm.save_to_path)")
    ex.add_argument("--out", required=True, help="output directory")
    ex.add_argument("--module", default=None, help="the RL module to export (a multi-agent run's checkpoint holds "
                    "one per role; default: the only one)")
    ex.set_defaults(func=_cmd_export)
    view = sub.add_parser("view", help="render a rollouts JSONL (from eval --out) as one self-contained HTML page",
                          description="Write one HTML page (no server, no network) showing every trajectory turn by "
                          "turn: state, reasoning, highlighted answer, actions, validity, rewards; a summary table "
                          "per env; filters by env and outcome (also from the URL fragment, #env=TAG&success=1).")
    view.add_argument("rollouts", help="a JSONL file written by `ragen-rllib eval --out`")
    view.add_argument("--out", default=None, help="the HTML file (default: the JSONL's name with .html)")
    view.add_argument("--title", default=None, help="page title")
    view.set_defaults(func=_cmd_view)
    play = sub.add_parser("play-envs", help="play every built-in env with oracle and random policies (no LLM)")
    play.add_argument("--episodes", type=int, default=20, help="episodes per env and policy")
    play.add_argument("--seed", type=int, default=0, help="first reset seed")
    play.set_defaults(func=_cmd_play_envs)
    envs = sub.add_parser("envs", help="list the built-in environments and their config keys")
    envs.set_defaults(func=_cmd_envs)
    se = sub.add_parser("serve-env", help="serve an env over OpenEnv's protocol (WebSocket sessions, HTTP)",
                        description="Serve ENV (a gymnasium id, a built-in's short name or module:Class) as an "
                        "OpenEnv server; train on it with .environment('http://HOST:PORT').")
    se.add_argument("env", help="the env: ragen/FrozenLake-v0, FrozenLake, SearchQA, my_pkg.envs:MyEnv")
    se.add_argument("--port", type=int, default=S.DEFAULT_PORT, help="TCP port")
    se.add_argument("--host", default=S.DEFAULT_HOST, help="address to bind (default: this machine only)")
    se.add_argument("--env-config", default="{}", metavar="JSON", help="the env's env_config as a JSON object")
    se.add_argument("--max-sessions", type=int, default=S.MAX_SESSIONS,
                    help="concurrent episodes (sessions) the server holds")
    se.add_argument("--session-timeout-s", type=float, default=S.SESSION_TIMEOUT_S,
                    help="a session idle this long is closed and its env dropped")
    se.set_defaults(func=_cmd_serve_env)
    mm = sub.add_parser("make-model", help="build a tiny model or bring a pretrained one (GGUF, HF), optionally "
                        "warm-started on oracle demonstrations",
                        description="Write a Hugging Face model directory to --out: a tiny model built from scratch "
                        "(--preset), a GGUF file converted (--from-gguf) or a copy of a named model (--model, e.g. "
                        "gguf:smollm2-135m-instruct); then optionally SFT on oracle demonstrations in the exact "
                        "rollout format (--warm-start) and an acceptance rollout, recorded in warm_start.json.")
    source = mm.add_mutually_exclusive_group()
    source.add_argument("--preset", choices=["nano", "small"], default="small",
                        help="tiny model size preset, built from scratch (the default source)")
    source.add_argument("--from-gguf", metavar="FILE", help="convert a GGUF file (llama, qwen2, ...: any architecture "
                        "transformers reads) into a Hugging Face directory (fp32, tokenizer with chat template)")
    source.add_argument("--model", metavar="NAME", help="start from a model: gguf:smollm2-135m-instruct (the shipped "
                        "pretrained instruct model), gguf:FILE, a Hugging Face id or directory")
    mm.add_argument("--out", required=True, help="output directory (save_pretrained layout)")
    mm.add_argument("--warm-start", default="", metavar="ENV,ENV",
                    help="envs for the SFT warm start: ids, short names or RAGEN tags (FrozenLake, SimpleSokoban)")
    mm.add_argument("--episodes", type=int, default=None, help="demonstration episodes per env")
    mm.add_argument("--epochs", type=int, default=None, help="SFT epochs")
    mm.add_argument("--lr", type=float, default=None,
                    help="SFT learning rate (default: 2e-3 from scratch, 2e-5 for a pretrained model)")
    mm.add_argument("--batch-size", type=int, default=None, help="SFT samples per step (default: 8 / 4 pretrained)")
    mm.add_argument("--seed", type=int, default=0, help="seed of weights, demonstrations and training")
    mm.add_argument("--noise", type=float, default=None,
                    help="probability a demonstrated action is random (default: WarmStartConfig's)")
    mm.add_argument("--agent", action="append", default=[], metavar="KEY=VALUE",
                    help="agent setting of the demonstrations and the acceptance rollout (repeatable), e.g. "
                    "--agent enable_think=false --agent max_turns=3: use the settings you will train with")
    mm.add_argument("--autocast", choices=["auto", "bfloat16", "none"], default="auto",
                    help="bf16 autocast of the SFT forward passes; auto: only on CUDA with bf16 or CPUs with "
                    "AVX512-BF16/AMX, else fp32")
    mm.add_argument("--eval-env", default=None, help="env of the acceptance rollout (default: FrozenLake-4x4 "
                    "non-slippery if warm-started on FrozenLake, else the first warm-start env)")
    mm.add_argument("--eval-episodes", type=int, default=64, help="episodes of the acceptance rollout")
    mm.add_argument("--no-eval", action="store_true", help="skip the acceptance rollout after the warm start")
    mm.set_defaults(func=_cmd_make_model)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as err:  # bad input: one clear line, exit code 2, no traceback
        parser.exit(2, f"ragen-rllib {args.command}: error: {err}\n")


if __name__ == "__main__":
    sys.exit(main())
