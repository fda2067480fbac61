import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.parsing import parse_response

NAMES = ["Left", "Down", "Right", "Up"]
CFG = AgentConfig()


def parse(text, cfg=CFG, names=NAMES):
    return parse_response(text, cfg, names)


def test_well_formed_two_actions_case_insensitive():
    p = parse("<think> go down then right </think> <answer> down || RIGHT </answer>")
    assert p.format_ok and p.actions == ("Down", "Right") and p.num_invalid == 0
    assert p.think == "go down then right" and p.answer == "down || RIGHT"


def test_keeps_at_most_max_actions_per_turn():
    p = parse("<think>x</think><answer>Up || Up || Left || Down</answer>")
    assert p.actions == ("Up", "Up")
    p3 = parse("<think>x</think><answer>Up || Up || Left</answer>", AgentConfig(max_actions_per_turn=3))
    assert p3.actions == ("Up", "Up", "Left")


def test_invalid_names_are_dropped_and_counted():
    p = parse("<think>x</think><answer>Jump || Left</answer>")
    assert p.format_ok and p.actions == ("Left",) and p.num_invalid == 1


@pytest.mark.parametrize("text", [
    "",
    "<think> no close",
    "<think>a</think>",
    "<think>a</think><answer>Left",  # truncated mid-answer
    "<think>a<think>b</think><answer>Left</answer>",  # nested think
    "<think>a</think><answer><answer>Left</answer></answer>",  # nested answer
    "<think>a</think><answer>   </answer>",  # empty answer
    "<answer>Left</answer>",  # thinking required
    "hello <think>a</think><answer>Left</answer>",  # text before the think tag
])
def test_malformed_fails_format(text):
    p = parse(text)
    assert not p.format_ok and p.actions == ()


def test_trailing_text_after_answer_is_ignored():
    assert parse("<think>a</think><answer>Left</answer> bye").actions == ("Left",)


def test_answer_only_mode():
    cfg = AgentConfig(enable_think=False)
    assert parse("<answer> Up </answer>", cfg).actions == ("Up",)
    assert not parse("<think>a</think><answer>Up</answer>", cfg).format_ok


def test_free_form_answer_is_one_action():
    p = parse("<think>sum</think><answer> (3 + 4) * 2 || 1 </answer>", names=[])
    assert p.format_ok and p.actions == ("(3 + 4) * 2 || 1",)


def test_custom_separator():
    cfg = AgentConfig(action_sep=",")
    assert parse("<think>a</think><answer>Left, Up</answer>", cfg).actions == ("Left", "Up")


def test_huge_garbage_is_rejected_quickly():
    assert not parse("<think>" + "garbage " * 20000).format_ok
    assert not parse("</answer><think>" * 10000).format_ok


FRAGMENTS = st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "||", "Left", "up", " ", "\n", "<",
                             "\x00"])


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS | st.text(max_size=4), max_size=40).map("".join),
       st.sampled_from([NAMES, []]), st.booleans())
def test_never_raises_and_actions_are_legal(text, names, think):
    cfg = AgentConfig(enable_think=think)
    p = parse(text, cfg, names)
    assert len(p.actions) <= (cfg.max_actions_per_turn if names else 1)
    if names:
        assert set(p.actions) <= set(names)
    if not p.format_ok:
        assert p.actions == ()


@given(st.one_of(st.none(), st.integers(), st.binary()))
def test_non_string_input_fails_format(obj):
    assert not parse(obj).format_ok


# The collapse seen under aggressive RL updates: answers padded with empty separator parts.
COLLAPSED = [
    "<think>go</think><answer>Right || || || ||</answer>",
    "<think>go</think><answer>Right ||</answer>",
    "<think>go</think><answer> || Down</answer>",
    "<think>go</think><answer>Down ||  || Right</answer>",
]


@pytest.mark.parametrize("text", COLLAPSED)
def test_empty_parts_are_dropped_silently_by_default(text):
    p = parse(text)
    assert p.format_ok and p.num_invalid == 0 and p.actions


@pytest.mark.parametrize("text, empty", list(zip(COLLAPSED, [4, 1, 1, 1], strict=True)))
def test_reject_empty_actions_counts_each_empty_part_as_invalid(text, empty):
    strict = AgentConfig(reject_empty_actions=True)
    p = parse(text, strict)
    assert p.num_invalid == empty
    assert p.actions == parse(text).actions  # the named actions still execute, in order


@pytest.mark.parametrize("text", COLLAPSED)
def test_reject_empty_actions_format_breaks_the_answer_and_runs_nothing(text):
    p = parse(text, AgentConfig(reject_empty_actions="format"))
    assert not p.format_ok and p.actions == ()


@pytest.mark.parametrize("mode", [True, "format"])
def test_reject_empty_actions_keeps_clean_answers_valid(mode):
    strict = AgentConfig(reject_empty_actions=mode)
    p = parse("<think>x</think><answer> Down || Right </answer>", strict)
    assert p.format_ok and p.num_invalid == 0 and p.actions == ("Down", "Right")


@pytest.mark.parametrize("value", ["yes", "Format", 1, None])
def test_reject_empty_actions_refuses_other_values_by_name(value):
    with pytest.raises(ValueError, match=r"reject_empty_actions=.* is invalid: use one of \(False, True, 'format'\)"):
        AgentConfig(reject_empty_actions=value)


def test_reject_empty_actions_gives_the_format_penalty_in_a_turn():
    import gymnasium as gym

    import ragen_rllib.envs  # noqa: F401  (registers ragen/*)
    from ragen_rllib.agent.turns import execute_turn

    text = "<think>go</think><answer>Right || ||</answer>"
    for cfg, penalized, moved in ((CFG, False, ("Right",)), (AgentConfig(reject_empty_actions=True), True, ("Right",)),
                                  (AgentConfig(reject_empty_actions="format"), True, ())):
        env = gym.make("ragen/FrozenLake-v0", size=4, is_slippery=False)
        state, _ = env.reset(seed=123)
        result = execute_turn(env, parse(text, cfg), cfg, cfg.max_actions_per_traj, state)
        assert result.actions == moved
        assert result.penalized is penalized
        assert result.reward == pytest.approx(cfg.format_penalty if penalized else 0.0)


@pytest.mark.parametrize("text, extra", [("<think>x</think><answer> Down || Right || Up </answer>", True),
                                         ("<think>x</think><answer> Down || Right || Up || Up || Left </answer>", True),
                                         ("<think>x</think><answer> Down || Right </answer>", False)])
def test_reject_extra_actions_breaks_the_format_of_an_answer_with_too_many_actions(text, extra):
    strict = AgentConfig(reject_extra_actions=True)
    lax = parse(text)
    assert lax.format_ok and lax.num_invalid == 0 and lax.actions == ("Down", "Right")  # RAGEN: extras dropped
    p = parse(text, strict)
    assert p.format_ok is not extra
    assert p.actions == (() if extra else ("Down", "Right"))  # nothing of a broken answer executes


def test_reject_extra_actions_gives_the_format_penalty_and_moves_nothing():
    import gymnasium as gym

    import ragen_rllib.envs  # noqa: F401  (registers ragen/*)
    from ragen_rllib.agent.turns import execute_turn

    strict = AgentConfig(reject_extra_actions=True)
    text = "<think>go</think><answer>Right || Down || Down</answer>"
    for cfg, penalized, moved in ((CFG, False, ("Right", "Down")), (strict, True, ())):
        env = gym.make("ragen/FrozenLake-v0", size=4, is_slippery=False)
        state, _ = env.reset(seed=123)
        result = execute_turn(env, parse(text, cfg), cfg, cfg.max_actions_per_traj, state)
        assert result.actions == moved
        assert result.penalized is penalized
        if penalized:
            assert result.reward == pytest.approx(cfg.format_penalty)
