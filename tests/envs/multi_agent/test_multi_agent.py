"""The turn-based multi-agent contract (PettingZoo AEC with text): whose turn, per-agent observations, rewards
and infos, invalid actions, forfeits, truncation, the dead-step loop; tic-tac-toe's minimax; the cooperative
solver/verifier pair."""

from fractions import Fraction

import numpy as np
import pytest
from pettingzoo import AECEnv

from ragen_rllib.envs.multi_agent.guided_lake import GUIDE, WALKER, GuidedLakeEnv
from ragen_rllib.envs.multi_agent.solver_verifier import SOLVER, VERIFIER, SolverVerifierEnv
from ragen_rllib.envs.multi_agent.tictactoe import OPPONENTS, TicTacToeEnv, minimax_value


def play(env, seed, policies):
    """The AEC loop; ``policies[agent](env, agent) -> action``; returns each agent's total reward and last info."""
    env.reset(seed=seed)
    totals = {a: 0.0 for a in env.possible_agents}
    infos = {}
    for agent in env.agent_iter(max_iter=200):
        obs, reward, term, trunc, info = env.last()
        totals[agent] += reward
        infos[agent] = info
        assert isinstance(obs, str)
        env.step(None if term or trunc else policies[agent](env, agent))
    assert env.agents == []  # every agent stepped out after the end
    return totals, infos


def oracle(env, agent):
    return env.oracle_action(agent)


def opponent(kind):
    return lambda env, agent: env.opponent_action(agent, kind)


def test_envs_are_aec_envs_with_text_spaces():
    for env in (TicTacToeEnv(), SolverVerifierEnv(), GuidedLakeEnv()):
        assert isinstance(env, AECEnv)
        env.reset(seed=0)
        for agent in env.possible_agents:
            assert env.observation_space(agent).contains(env.observe(agent))
            assert env.action_space(agent).contains("1")


def test_perfect_play_draws_and_never_loses_to_the_pool():
    assert minimax_value((".",) * 9, "X") == 0
    for seed in range(10):
        totals, infos = play(TicTacToeEnv(), seed, {"x": oracle, "o": oracle})
        assert totals == {"x": 0.0, "o": 0.0} and not infos["x"]["success"] and not infos["o"]["success"]
    for kind in OPPONENTS:
        for seed in range(15):
            totals, _ = play(TicTacToeEnv(opening_moves=0), seed, {"x": oracle, "o": opponent(kind)})
            assert totals["x"] >= 0.0, (kind, seed)
    wins = sum(play(TicTacToeEnv(), s, {"x": oracle, "o": opponent("random")})[1]["x"]["success"] for s in range(20))
    assert wins >= 15


def test_each_agent_sees_its_own_side_and_openings_come_from_the_seed():
    env = TicTacToeEnv(opening_moves=3)
    env.reset(seed=4)
    assert env.agent_selection == "o" and env.board.count(".") == 6
    assert env.observe("o").startswith("You are O.") and "(your turn)" in env.observe("o")
    assert env.observe("x").startswith("You are X.") and "(the other player's turn)" in env.observe("x")
    boards = set()
    for seed in range(8):
        env.reset(seed=seed)
        boards.add(env.board)
        again = TicTacToeEnv(opening_moves=3)
        again.reset(seed=seed)
        assert again.board == env.board
    assert len(boards) > 4


@pytest.mark.parametrize("action", ["banana", "10", "0", "", None, 3, b"\xff", "5" * 5000, "1; rm -rf /"])
def test_untrusted_actions_are_invalid_never_errors(action):
    env = TicTacToeEnv()
    env.reset(seed=0)
    env.step(action)
    assert env.agent_selection == "x" and env.rewards["x"] == -0.1 and not env.infos["x"]["action_is_valid"]
    assert env.board == (".",) * 9


def test_an_occupied_cell_is_invalid_and_three_in_a_row_forfeit():
    env = TicTacToeEnv()
    env.reset(seed=0)
    env.step("5")
    assert env.agent_selection == "o" and env.infos["x"]["action_is_valid"]
    env.step("5")
    env.step("5")
    assert not any(env.terminations.values())
    env.step("5")  # the third invalid action in a row: o forfeits
    assert all(env.terminations.values())
    assert env.rewards == {"x": 1.0, "o": -1.1}
    assert env.infos["x"]["success"] and not env.infos["o"]["success"]


def test_a_win_pays_one_and_costs_the_other_one():
    env = TicTacToeEnv()
    env.reset(seed=0)
    for cell in ["1", "4", "2", "5"]:
        env.step(cell)
    env.step("3")
    assert all(env.terminations.values()) and env.rewards == {"x": 1.0, "o": -1.0}
    assert env.infos["x"]["success"] and not env.infos["o"]["success"]


def test_the_oracle_team_always_succeeds_and_rewards_are_joint():
    for seed in range(20):
        totals, infos = play(SolverVerifierEnv(), seed, {SOLVER: oracle, VERIFIER: oracle})
        assert totals == {SOLVER: 1.0, VERIFIER: 1.0} and infos[SOLVER]["success"] and infos[VERIFIER]["success"]


def test_accepting_a_wrong_answer_fails_the_team_and_rejections_run_out():
    env = SolverVerifierEnv(max_rounds=2)
    env.reset(seed=1)
    env.step("1 + 1")
    assert env.agent_selection == VERIFIER and "The solver proposes: 1 + 1" in env.observe(VERIFIER)
    env.step("accept")
    assert all(env.terminations.values()) and env.rewards == {SOLVER: 0.0, VERIFIER: 0.0}
    assert not env.infos[SOLVER]["success"]

    env.reset(seed=1)
    env.step(env.oracle_action(SOLVER))
    env.step("reject")  # a right answer rejected: the next round
    assert env.agent_selection == SOLVER and "Rejected earlier" in env.observe(SOLVER)
    env.step(env.oracle_action(SOLVER))
    env.step("reject")
    assert all(env.terminations.values()) and not env.infos[VERIFIER]["success"]


def test_show_value_gives_the_verifier_the_evaluated_proposal_and_the_solver_nothing():
    env = SolverVerifierEnv(num_numbers=2, max_number=9, max_target=20, show_value=True)
    env.reset(seed=1)
    a, b = env.game.numbers
    env.step(f"{a} / {b} + {b}")
    assert env.observe(VERIFIER).endswith(f"The solver proposes: {a} / {b} + {b}\nIts value: {Fraction(a, b) + b}")
    env.step("reject")
    assert "value" not in env.observe(SOLVER).lower()
    plain = SolverVerifierEnv(num_numbers=2, max_number=9, max_target=20)
    plain.reset(seed=1)
    plain.step(f"{a} / {b} + {b}")
    assert "Its value" not in plain.observe(VERIFIER)
    with pytest.raises(ValueError, match="env_config\\['show_value'\\] = 'yes' is invalid"):
        SolverVerifierEnv(show_value="yes")


def test_the_verdict_reward_pays_each_right_verdict_and_success_stays_joint():
    def game(verdicts, proposals):
        env = SolverVerifierEnv(max_rounds=2, verifier_reward="verdict")
        env.reset(seed=1)
        totals = {SOLVER: 0.0, VERIFIER: 0.0}
        for proposal, verdict in zip(proposals, verdicts):
            for action in (proposal(env), verdict):
                env.step(action)
                for agent in totals:
                    totals[agent] += env.rewards[agent]
        return totals, env.infos

    def wrong(env):
        return f"{env.game.numbers[0]} + 1"

    # a wrong proposal rejected (paid at once), then a right one accepted: the verifier 2, the team 1
    totals, infos = game(["reject", "accept"], [wrong, lambda env: env.oracle_action(SOLVER)])
    assert totals == {SOLVER: 1.0, VERIFIER: 2.0} and infos[VERIFIER]["success"] and infos[SOLVER]["success"]
    # a right proposal rejected, then a wrong one accepted: the verifier 0, the team 0
    totals, infos = game(["reject", "accept"], [lambda env: env.oracle_action(SOLVER), wrong])
    assert totals == {SOLVER: 0.0, VERIFIER: 0.0} and not infos[VERIFIER]["success"]
    # two wrong proposals rejected: the verifier 2, the team 0 (and no success for anyone)
    totals, infos = game(["reject", "reject"], [wrong, wrong])
    assert totals == {SOLVER: 0.0, VERIFIER: 2.0} and not infos[VERIFIER]["success"]
    with pytest.raises(ValueError, match="env_config\\['verifier_reward'\\] = 'solver' is invalid"):
        SolverVerifierEnv(verifier_reward="solver")


def test_the_oracle_guide_and_a_walker_who_follows_always_reach_the_goal():
    for seed in range(20):
        totals, infos = play(GuidedLakeEnv(size=4, p=0.8), seed, {GUIDE: oracle, WALKER: oracle})
        assert totals == {GUIDE: 1.0, WALKER: 1.0} and infos[GUIDE]["success"] and infos[WALKER]["success"]


def test_only_the_guide_sees_the_map_and_only_the_walker_moves():
    env = GuidedLakeEnv(size=4, p=0.8)
    env.reset(seed=5)
    assert env.agent_selection == GUIDE and "G" in env.observe(GUIDE) and "P" in env.observe(GUIDE)
    walker_view = env.observe(WALKER)
    assert "row 1, column 1 of a 4x4 lake" in walker_view and "G" not in walker_view.replace("The guide", "")
    env.step("down.")  # case and a trailing full stop are forgiven
    assert env.agent_selection == WALKER and walker_view != env.observe(WALKER)
    assert env.observe(WALKER).endswith("The guide says: Down") and env.lake.state == 0  # advice moves nothing
    env.step("Right")  # the walker may ignore the advice
    assert env.lake.state == 1 and env.agent_selection == GUIDE and "row 1, column 2" in env.observe(WALKER)


def test_a_hole_fails_the_team_and_a_stuck_walker_forfeits():
    env = GuidedLakeEnv(size=4, p=0.8)
    for seed in range(50):  # a lake with a hole next to the start
        env.reset(seed=seed)
        if env.lake.desc[0][1] == "H":
            break
    else:
        raise AssertionError("no map with a hole right of the start in 50 seeds")
    env.step("Right")
    env.step("Right")
    assert all(env.terminations.values()) and env.rewards == {GUIDE: 0.0, WALKER: 0.0}
    assert not env.infos[GUIDE]["success"] and not env.infos[WALKER]["success"]
    env = GuidedLakeEnv(max_invalid=2)
    env.reset(seed=0)
    env.step("Down")
    env.step("walk north-ish")
    env.step("jump")
    assert all(env.terminations.values()) and env.rewards == {GUIDE: 0.0, WALKER: -0.1}


def test_the_step_limit_ends_the_game_without_success():
    env = GuidedLakeEnv(size=4, p=1.0, max_steps=3)
    env.reset(seed=0)
    for _ in range(3):
        env.step("Up")  # the guide says up, the walker bumps into the top edge
        env.step("Up")
    assert all(env.terminations.values()) and not env.infos[WALKER]["success"]
    with pytest.raises(ValueError, match="env_config\\['max_steps'\\] = 0 is invalid"):
        GuidedLakeEnv(max_steps=0)
    with pytest.raises(ValueError, match="env_config\\['size'\\] = 1 is invalid"):
        GuidedLakeEnv(size=1)


def test_random_actions_are_well_formed_moves_that_vary():
    rng = np.random.default_rng(0)
    ttt = TicTacToeEnv(opening_moves=2)
    ttt.reset(seed=3)
    cells = {ttt.random_action("x", rng) for _ in range(50)}
    assert cells == {str(i + 1) for i, c in enumerate(ttt.board) if c == "."}  # every free cell, no taken one
    pair = SolverVerifierEnv(num_numbers=3)
    pair.reset(seed=2)
    proposals = {pair.random_action(SOLVER, rng) for _ in range(50)}
    assert len(proposals) > 5
    for proposal in proposals:  # each a valid move: the verifier's turn comes, nothing is penalised
        pair.reset(seed=2)
        pair.step(proposal)
        assert pair.agent_selection == VERIFIER and pair.rewards[SOLVER] == 0.0
    assert {pair.random_action(VERIFIER, rng) for _ in range(20)} == {"accept", "reject"}
    lake = GuidedLakeEnv()
    lake.reset(seed=0)
    assert {lake.random_action(a, rng) for a in (GUIDE, WALKER) for _ in range(30)} == {"Left", "Down", "Right", "Up"}


def test_a_stuck_teammate_fails_the_team():
    env = SolverVerifierEnv(max_invalid=2)
    env.reset(seed=0)
    env.step("no idea")
    env.step("still no idea")
    assert all(env.terminations.values()) and not any(i["success"] for i in env.infos.values())
    assert env.rewards == {SOLVER: -0.1, VERIFIER: 0.0}


@pytest.mark.parametrize(("key", "value"), [("invalid_penalty", 0.5), ("max_invalid", 0), ("opening_moves", 7)])
def test_bad_settings_name_the_key(key, value):
    with pytest.raises(ValueError, match=f"env_config\\[{key!r}\\] = {value!r} is invalid"):
        TicTacToeEnv(**{key: value})
