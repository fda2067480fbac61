"""One RL module per role on the real stack: RLlib's MultiRLModule on the learner, one engine per module on the env
runner (Ray actors), each module's own settings, weight syncs that reach only a module's own engine, checkpoints
of every module.

Tic-tac-toe with the nano model: it makes no valid move, so whoever moves first forfeits after ``max_invalid``
tries. Two env tags (``x`` opens / ``o`` opens after one random opening move) give both roles turns to learn from.
"""

import pytest
import torch

from ragen_rllib import RagenConfig
from ragen_rllib.core import keys as K

pytestmark = pytest.mark.slow

TTT = "ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv"
TAGS = [{"tag": "x_opens", "env": TTT, "env_config": {"opening_moves": 0, "max_invalid": 2}, "groups": 1},
        {"tag": "o_opens", "env": TTT, "env_config": {"opening_moves": 1, "max_invalid": 2}, "groups": 1}]


def two_roles(**training):
    kw = dict(adv_estimator="grpo", group_size=2, minibatch_size=4, max_turns=2, max_response_tokens=6, lr=1e-3,
              val_env_groups=1, engine="hf", engine_kwargs={}, max_model_len=1024)
    kw.update(training)
    return (RagenConfig()
            .environment(env_tags=TAGS)
            .env_runners(num_env_runners=1)
            .learners(num_learners=0)
            .rl_module(model_config={"model": "tiny:nano", "autocast": None},
                       algorithm_config_overrides_per_module={"o": {"lr": 5e-2}})
            .multi_agent(agent_to_module={"x": "x", "o": "o"})
            .training(**kw)
            .debugging(seed=0))


def probe():
    from transformers import AutoTokenizer

    from ragen_rllib.models.registry import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("tiny:nano"))
    prompts = [tok.apply_chat_template([{"role": "user", "content": f"Board {i}: X . O. Your move?"}],
                                       add_generation_prompt=True, tokenize=True, return_dict=False) for i in range(2)]
    return prompts, [tok.encode(f"<answer>{i + 3}</answer>") for i in range(2)]


def learner_scores(algo, module_id):
    prompts, conts = probe()

    def score(learner):
        module = learner.module[module_id].unwrapped()
        with torch.no_grad():
            return [module._forward_train({K.INPUT_IDS: torch.tensor([list(p) + list(c)])}, entropy=False)
                    [K.LOGPROBS][0, len(p):].tolist() for p, c in zip(prompts, conts)]

    return next(iter(algo.learner_group.foreach_learner(score))).get()


def engine_scores(algo, module_id):
    prompts, conts = probe()
    return algo.env_runner_group.foreach_env_runner(lambda r: r.engines[module_id].score(prompts, conts),
                                                    local_env_runner=False)[0]


def learner_modules(algo):
    return next(iter(algo.learner_group.foreach_learner(lambda learner: sorted(learner.module.keys())))).get()


def gap(a, b):
    return max(abs(x - y) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))


def bump_module(algo, module_id, amount):
    """Add ``amount`` to one module's output layer on the learner (a stand-in for an update of that role only)."""
    def bump(learner):
        lm = learner.module[module_id].unwrapped().lm
        with torch.no_grad():
            lm.get_output_embeddings().weight.add_(amount)
        return True

    algo.learner_group.foreach_learner(bump)


#: engine -> (its settings, how close its log-probs come to the learner's on the same weights)
ENGINES = {"hf": ({"engine": "hf", "engine_kwargs": {}}, 1e-4),
           "vllm": ({"engine": "vllm", "engine_kwargs": {"max_model_len": 1024}}, 1e-3)}


@pytest.mark.slow(seconds=27)
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_each_role_learns_its_own_module_its_weights_reach_only_its_engine_and_all_restore(ray_session, tmp_path,
                                                                                          engine):
    """With vLLM: two in-process vLLM engines in one runner process, one per module."""
    from ray.rllib.algorithms.algorithm import Algorithm

    settings, tol = ENGINES[engine]
    algo = two_roles(**settings).build_algo()
    try:
        assert learner_modules(algo) == ["o", "x"]
        assert sorted(algo.env_runner_group.foreach_env_runner(lambda r: sorted(r.engines),
                                                               local_env_runner=False)[0]) == ["o", "x"]
        before = {m: learner_scores(algo, m) for m in ("x", "o")}
        result = algo.train()
        learners = result["learners"]
        assert learners["x"][K.POLICY_LOSS] == learners["x"][K.POLICY_LOSS]  # both modules took a step
        assert learners["o"][K.POLICY_LOSS] == learners["o"][K.POLICY_LOSS]
        runners = result["env_runners"]
        for tag in ("x_opens", "o_opens"):
            assert f"{tag}/x/{K.SUCCESS_RATE}" in runners and f"{tag}/o/{K.SUCCESS_RATE}" in runners
        after = {m: learner_scores(algo, m) for m in ("x", "o")}
        # o's own lr (50x x's) moved its log-probs further: the per-module override reached o's optimizer only
        assert gap(after["o"], before["o"]) > 5 * gap(after["x"], before["x"]) > 0
        for m in ("x", "o"):  # the sync after the update: each engine holds its own module's weights
            assert gap(engine_scores(algo, m), after[m]) < tol
        assert gap(engine_scores(algo, "x"), after["o"]) > 10 * tol  # and the two modules differ
        algo.save_to_path(str(tmp_path / "ckpt"))
        # an update of one role reaches that role's engine and leaves the other's untouched
        bump_module(algo, "o", 0.5)
        algo.sync_engine_weights()
        assert gap(engine_scores(algo, "o"), learner_scores(algo, "o")) < tol
        assert gap(engine_scores(algo, "o"), after["o"]) > 10 * tol
        assert gap(engine_scores(algo, "x"), after["x"]) < tol
    finally:
        algo.stop()
    # the checkpoint (taken before the bump) brings back every module, into its learner and its own engine
    restored = Algorithm.from_checkpoint(str(tmp_path / "ckpt"))
    try:
        assert sorted(restored.config.policies) == ["o", "x"]
        assert restored.config.get_config_for_module("o").lr == 5e-2  # per-module settings come back too
        for m in ("x", "o"):
            assert gap(learner_scores(restored, m), after[m]) == 0.0
            assert gap(engine_scores(restored, m), after[m]) < tol
        restored.train()
    finally:
        restored.stop()


def test_training_against_a_scripted_opponent_trains_only_the_llm_side(ray_session):
    config = (two_roles().environment(TTT, env_tags=[], env_config={"opening_moves": 1})
              .multi_agent(agent_to_module={"x": "x"}, policies=["x"], scripted_agents={"o": "random"})
              .rl_module(algorithm_config_overrides_per_module={}))
    config.algorithm_config_overrides_per_module = {}
    config.env_groups = 2
    algo = config.build_algo()
    try:
        result = algo.train()
        assert learner_modules(algo) == ["x"]
        assert f"x/{K.SUCCESS_RATE}" in result["env_runners"] and f"o/{K.SUCCESS_RATE}" not in result["env_runners"]
        assert "x" in result["learners"] and "o" not in result["learners"]
    finally:
        algo.stop()


CLI_CONFIG = """
environment:
  env_tags:
    - {tag: x_opens, env: "ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv",
       env_config: {opening_moves: 0, max_invalid: 2},
       groups: 1}
    - {tag: o_opens, env: "ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv",
       env_config: {opening_moves: 1, max_invalid: 2},
       groups: 1}
multi_agent: {agent_to_module: {x: x, o: o}}
env_runners: {num_env_runners: 1}
learners: {num_learners: 0}
rl_module:
  model_config: {model: "tiny:nano", autocast: null}
  algorithm_config_overrides_per_module: {o: {lr: 5.0e-2}}
training: {adv_estimator: grpo, group_size: 2, minibatch_size: 4, max_turns: 2, max_response_tokens: 6,
           lr: 1.0e-3, val_env_groups: 1, engine: hf, engine_kwargs: {}, max_model_len: 1024}
debugging: {seed: 0}
run: {stop: {training_iteration: 2}, checkpoint_every: 2}
"""


def test_the_cli_trains_evaluates_exports_and_views_a_two_role_run(ray_session, tmp_path, capsys):
    from ragen_rllib.cli import main
    from ragen_rllib.evaluation.evaluate import checkpoint_modules
    from ragen_rllib.run.train import CONFIG_FILE

    cfg = tmp_path / "run.yaml"
    cfg.write_text(CLI_CONFIG)
    out = tmp_path / "run"
    assert main(["train", str(cfg), f"run.out_dir={out}"]) == 0
    assert "iter    2" in capsys.readouterr().out
    saved = (out / CONFIG_FILE).read_text()  # the run's own config keeps the roles and o's own lr
    assert "agent_to_module:" in saved and "lr: 0.05" in saved
    checkpoint = out / "checkpoints" / "iter_0002"
    assert checkpoint_modules(checkpoint) == ["o", "x"]

    rollouts = tmp_path / "rollouts.jsonl"
    assert main(["eval", str(checkpoint), "--config", str(out / CONFIG_FILE), "--episodes", "2", "--k", "1",
                 "--out", str(rollouts)]) == 0
    printed = capsys.readouterr().out.split("trajectories written")[0]
    import json

    report = json.loads(printed[printed.index("{\n"):])
    assert {"x_opens/x", "x_opens/o", "o_opens/x", "o_opens/o", "all"} <= set(report)
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert {(r["env"], r["agent"], r["module"]) for r in rows} >= {("x_opens/x", "x", "x"), ("o_opens/o", "o", "o")}
    assert all("tic-tac-toe as " + r["agent"].upper() in r["system"] for r in rows)  # each side's own prompt

    page = tmp_path / "view.html"
    assert main(["view", str(rollouts), "--out", str(page)]) == 0
    html = page.read_text()
    assert "agent x (module x)" in html and "agent o (module o)" in html

    with pytest.raises(SystemExit) as stopped:  # a clear error, exit code 2
        main(["export", str(checkpoint), "--out", str(tmp_path / "hf")])
    assert stopped.value.code == 2
    assert "holds the modules ['o', 'x']: name the one to export (--module NAME)" in capsys.readouterr().err
    assert main(["export", str(checkpoint), "--out", str(tmp_path / "hf_o"), "--module", "o"]) == 0
    assert (tmp_path / "hf_o" / "config.json").is_file()
