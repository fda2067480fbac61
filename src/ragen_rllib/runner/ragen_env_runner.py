"""RagenEnvRunner: an RLlib EnvRunner holding whole env groups and one generation engine per RL module.

Each ``sample()`` runs one synchronous multi-turn rollout over this runner's share of the groups (its block of
the run's env tags, and their seeds: see :mod:`ragen_rllib.core.env_tags`; every trajectory of a
group shares the seed) with ONE batched engine call per turn, and returns :class:`Trajectory` records
with the agent layer's exact-token transcripts. Model output and env errors are handled and counted
here: an exception escaping ``sample()`` would make RLlib kill and restart the runner (a slow restart).

With a turn-based multi-agent env, each round's turns are batched per module (one engine call per module), each
agent's module is RLlib's ``policy_mapping_fn``, scripted agents (``scripted_agents``) play fixed policies, and
every module's engine takes only its own module's weights (:meth:`load_weights`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gymnasium as gym
import ray
from ray.rllib.core import COMPONENT_RL_MODULE
from ray.rllib.env import INPUT_ENV_SINGLE_SPACES, INPUT_ENV_SPACES
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import (
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
    NUM_EPISODES_LIFETIME,
    WEIGHTS_SEQ_NO,
)

import ragen_rllib.envs  # noqa: F401  (registers the built-in envs in this process)
from ragen_rllib.agent.multi_agent import rollout_multi
from ragen_rllib.agent.rollout import rollout
from ragen_rllib.agent.trajectory import Trajectory, agent_trajectories
from ragen_rllib.core.allocator import release_freed_memory
from ragen_rllib.core.env_tags import split_groups, train_seed, val_seed
from ragen_rllib.core.keys import RUNNER_ERRORS_LIFETIME
from ragen_rllib.core.weight_sync import unpack_weights
from ragen_rllib.engines.base import SamplingConfig
from ragen_rllib.envs.base import text_space
from ragen_rllib.envs.loading import import_env_modules, make_env
from ragen_rllib.envs.multi_agent.turn_based import is_multi_agent
from ragen_rllib.envs.timeout import TimeLimitedEnv

logger = logging.getLogger(__name__)


class RagenEnvRunner(EnvRunner):
    """Samples multi-turn LLM trajectories (see the module docstring)."""

    def __init__(self, *, config, **kwargs) -> None:
        super().__init__(config=config, **kwargs)
        cfg = self.config
        self.agent_cfg = cfg.agent_config()
        self.runner_index = max((self.worker_index or 1) - 1, 0)
        self.num_runners = max(self.num_workers or 0, 1)
        import_env_modules(cfg.env_modules)  # user envs register in this process too
        self._blocks = {False: split_groups(cfg.train_tags, self.num_runners),  # every runner's block of groups
                        True: split_groups(cfg.val_tags, self.num_runners)}
        self.train_slots = self._blocks[False][self.runner_index]  # the groups this runner holds
        self.val_slots = self._blocks[True][self.runner_index]
        # envs per (block, validation): its own training block now, the rest when first sampled (validation,
        # or another runner's block re-sampled after that runner died)
        self._envs: dict[tuple[int, bool], list[gym.Env]] = {}
        self.envs = self._block_envs(self.runner_index, validation=False)
        from ragen_rllib.core.modules import module_ids

        self.module_ids = module_ids(cfg)
        self.engines: dict[str, Any] = {}  # module id -> its generation engine
        self.chat = None
        self._seq_nos = {m: 0 for m in self.module_ids}  # module id -> the weight sync its engine holds
        self._scripted = None  # agent -> fixed policy (made with the first multi-agent env)
        self.last_rollout: dict[str, float] = {}
        self._build_engine()

    # ------------------------------------------------------------------ set-up
    def _build_engine(self) -> None:
        from ragen_rllib.core.model_config import model_setting
        from ragen_rllib.core.precision import resolve_engine_dtype
        from ragen_rllib.models.serving import engine_and_chat

        mc = self.config.model_config or {}
        kwargs = {"dtype": model_setting(mc, "dtype"), **dict(self.config.engine_kwargs or {})}
        device = engine_device(self.config.num_gpus_per_env_runner)
        kwargs["dtype"] = resolve_engine_dtype(kwargs["dtype"], model_setting(mc, "autocast"), device)
        kwargs.setdefault("device", device)
        if not self.config.num_gpus_per_env_runner:
            kwargs.setdefault("num_threads", engine_threads(self.config.num_cpus_per_env_runner))
        for module_id in self.module_ids:  # one engine per module: a module's weights reach its engine only
            self.engines[module_id], self.chat = engine_and_chat(self.config.model_name, self.agent_cfg,
                                                                 self.config.engine, **kwargs)

    @property
    def engine(self):
        """The first module's engine (the only one in a one-module run)."""
        return self.engines.get(self.module_ids[0])

    @engine.setter
    def engine(self, engine) -> None:
        self.engines[self.module_ids[0]] = engine

    # ------------------------------------------------------------------ sampling
    def _make_env(self, slot) -> gym.Env:
        env = make_env(slot.tag.env, slot.tag.env_config)
        timeout = self.config.env_step_timeout_s
        # a turn-based multi-agent env is no gymnasium env: no time-limit wrapper (its moves are pure Python)
        return env if timeout is None or is_multi_agent(env) else TimeLimitedEnv(env, timeout)

    def _block_envs(self, block: int, validation: bool) -> list[gym.Env]:
        """The envs of ``block``'s groups (``group_size`` per group); an env stuck in a timed-out call is
        replaced by a fresh one."""
        slots = self._blocks[validation][block]
        size = self.config.val_group_size if validation else self.config.group_size
        envs = self._envs.get((block, validation))
        if envs is None:
            envs = self._envs[(block, validation)] = [self._make_env(slot) for slot in slots for _ in range(size)]
        for i, env in enumerate(envs):
            if getattr(env, "stuck", False):
                envs[i] = self._make_env(slots[i // size])
        return envs

    def group_seeds(self, step: int, validation: bool = False, block: int | None = None) -> list[int]:
        """Env seed of each group of ``block`` (default: this runner's own) at training step ``step``
        (validation: fixed seeds)."""
        cfg = self.config
        slots = self._blocks[validation][self.runner_index if block is None else block]
        if validation:
            return [val_seed(slot, cfg.val_seed) for slot in slots]
        return [train_seed(slot, step, cfg.env_groups, cfg.train_seed_base) for slot in slots]

    @override(EnvRunner)
    def sample(self, *, step: int = 0, validation: bool = False, block: int | None = None,
               **kwargs) -> list[Trajectory]:
        """One multi-turn rollout over the groups of ``block`` (default: this runner's own; the driver hands
        a dead runner's block to a healthy one); never raises on model or env errors."""
        cfg = self.config
        block = self.runner_index if block is None else block
        size = cfg.val_group_size if validation else cfg.group_size
        slots = self._blocks[validation][block]
        seeds = [s for s in self.group_seeds(step, validation, block) for _ in range(size)]
        tags = [slot.tag.tag for slot in slots for _ in range(size)]
        # a group's id: its training seed (unique over steps); in validation its place in the list (tags may
        # share seeds)
        group_ids = seeds if not validation else [slot.index for slot in slots for _ in range(size)]
        envs = self._block_envs(block, validation)
        sampling = SamplingConfig(
            temperature=cfg.val_temperature if validation else cfg.train_temperature,
            top_p=cfg.top_p, top_k=cfg.top_k, max_tokens=self.agent_cfg.max_response_tokens,
            seed=None if cfg.seed is None else cfg.seed + step * 7919 + block,
        )
        start = time.perf_counter()
        multi = bool(envs) and is_multi_agent(envs[0])
        try:
            if multi:  # each agent's turns sampled by its module's engine (self-play: all on one module)
                episodes = rollout_multi(self.engines, {m: self.chat for m in self.engines}, envs, seeds,
                                         self.agent_cfg, sampling, module_of=self._module_of,
                                         scripted=self._scripted_agents(envs[0]))
            else:
                episodes = rollout(self.engine, self.chat, envs, seeds, self.agent_cfg, sampling)
        except Exception as err:  # an engine failure: count it, return nothing this time
            logger.exception("rollout failed on env runner %s", self.worker_index)
            self.metrics.log_value(RUNNER_ERRORS_LIFETIME, 1, reduce="lifetime_sum")
            return [Trajectory(env_id=tags[0] if tags else str(cfg.env), group_id=-1, seed=-1, error=repr(err))]
        seconds = time.perf_counter() - start
        if multi:
            trajectories = agent_trajectories(episodes, tags, group_ids, module_of=self._module_of)
        else:
            trajectories = [Trajectory.from_episode(ep, tag, group_id=g) for ep, tag, g in zip(episodes, tags,
                                                                                               group_ids)]
            for t in trajectories:
                t.module_id = self.module_ids[0]
        self.metrics.log_value(RUNNER_ERRORS_LIFETIME, sum(t.error is not None for t in trajectories),
                               reduce="lifetime_sum")
        tokens = sum(len(ids) for t in trajectories for ids in t.response_ids)
        if not validation:  # RLlib's step counters (Tune stop keys) count training samples only
            self._log_counters(steps=sum(int(t.metrics.get("num_turns", 0)) for t in trajectories),
                               episodes=len(trajectories))
        self.last_rollout = {"seconds": seconds, "generated_tokens": tokens}
        release_freed_memory()  # the rollout's high-water heap, back to the learner that runs next
        return trajectories

    def _log_counters(self, steps: int, episodes: int) -> None:
        """RLlib's standard counters, as its SingleAgentEnvRunner logs them (an env step = one turn)."""
        self.num_env_steps_sampled_lifetime += steps
        self.metrics.log_value(NUM_ENV_STEPS_SAMPLED, steps, reduce="sum")
        self.metrics.log_value(NUM_ENV_STEPS_SAMPLED_LIFETIME, steps, reduce="lifetime_sum", with_throughput=True)
        self.metrics.log_value(NUM_EPISODES, episodes, reduce="sum")
        self.metrics.log_value(NUM_EPISODES_LIFETIME, episodes, reduce="lifetime_sum")

    def _module_of(self, agent: str) -> str:
        from ragen_rllib.core.modules import module_of

        return module_of(self.config, agent)

    def _scripted_agents(self, env) -> dict:
        if self._scripted is None:
            from ragen_rllib.envs.multi_agent.turn_based import resolve_scripted

            self._scripted = {agent: resolve_scripted(name, type(env), f"scripted_agents[{agent!r}]")
                              for agent, name in self.config.scripted_agents.items()}
        return self._scripted

    # ------------------------------------------------------------------ weights
    def load_weights(self, weights: Any, seq_no: int, module_id: str | None = None) -> int:
        """Load Hugging Face-named weights (a dict, a :func:`pack_weights` payload, or an ObjectRef of either) into
        the engine of ``module_id`` (default: the first module's) and no other; returns the seq no of the
        runner (the oldest weights any of its engines holds)."""
        module_id = self.module_ids[0] if module_id is None else module_id
        if module_id not in self.engines:
            raise KeyError(f"env runner {self.worker_index} has no module {module_id!r}; it has {self.module_ids}")
        if isinstance(weights, ray.ObjectRef):
            weights = ray.get(weights)
        if seq_no == 0 or seq_no > self._seq_nos[module_id]:
            self.engines[module_id].load_weights(unpack_weights(weights))
            self._seq_nos[module_id] = max(seq_no, self._seq_nos[module_id])
            release_freed_memory()  # the unpacked copy of the weights
        return self.weights_seq_no

    @property
    def weights_seq_no(self) -> int:
        return min(self._seq_nos.values())

    # ------------------------------------------------------------------ RLlib EnvRunner API
    @override(EnvRunner)
    def get_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        space = text_space()
        env = space
        if self.envs and is_multi_agent(self.envs[0]):  # RLlib's multi-agent form: a Dict space keyed by agent
            llm = [a for a in self.envs[0].possible_agents if a not in self.config.scripted_agents]
            env = gym.spaces.Dict({a: space for a in llm})
        # RLlib's keys for the env's spaces (a multi-module run builds its connectors from the single one)
        return {**{m: (space, space) for m in self.module_ids}, INPUT_ENV_SPACES: (env, env),
                INPUT_ENV_SINGLE_SPACES: (env, env)}

    @override(EnvRunner)
    def assert_healthy(self) -> None:
        assert len(self.engines) == len(self.module_ids) and self.envs, "the env runner has no engine or no envs"

    @override(EnvRunner)
    def get_metrics(self) -> dict:
        return self.metrics.reduce()

    # get_state / set_state: RLlib's checkpoint and weight-sync entry points (EnvRunnerGroup calls them; the
    # EnvRunner base does not declare them, SingleAgentEnvRunner gets them from Checkpointable).
    def get_state(self, components=None, *, not_components=None, **kwargs) -> dict:
        return {WEIGHTS_SEQ_NO: self.weights_seq_no,
                NUM_ENV_STEPS_SAMPLED_LIFETIME: self.num_env_steps_sampled_lifetime}

    def set_state(self, state: dict) -> None:
        """RLlib's weight-sync entry point: ``{"rl_module": {module_id: state}, "weights_seq_no": n}``."""
        if COMPONENT_RL_MODULE in state:
            module_state = state[COMPONENT_RL_MODULE]
            if isinstance(module_state, ray.ObjectRef):
                module_state = ray.get(module_state)
            if not set(module_state) & set(self.module_ids):  # one module's state, not keyed by module
                module_state = {self.module_ids[0]: module_state}
            for module_id, one in module_state.items():
                if module_id not in self.engines:
                    continue
                weights = {k[len("lm."):]: v for k, v in one.items() if k.startswith("lm.")}
                if any("lora_" in k for k in weights):
                    # a LoRA module's state is its adapter only, which an engine holding merged weights cannot
                    # take; Ragen pushes the merged weights itself after a build or restore (sync_engine_weights)
                    logger.debug("env runner %s: LoRA adapter state left to Ragen's merged weight sync",
                                 self.worker_index)
                else:
                    self.load_weights(weights, int(state.get(WEIGHTS_SEQ_NO, 0)), module_id)
        if NUM_ENV_STEPS_SAMPLED_LIFETIME in state:
            self.num_env_steps_sampled_lifetime = state[NUM_ENV_STEPS_SAMPLED_LIFETIME]

    @override(EnvRunner)
    def stop(self) -> None:
        for engine in self.engines.values():
            engine.close()
        self.engines = {}


def engine_device(num_gpus: float) -> str:
    """A runner engine's device (both engines place themselves there; the engine precision follows it), by
    :func:`ragen_rllib.core.device.device_type` of ``num_gpus_per_env_runner``."""
    from ragen_rllib.core.device import device_type

    return device_type(num_gpus or 0)


def engine_threads(num_cpus: float | None) -> int:
    """CPU threads of a CPU runner's engine: the CPUs Ray reserves for the runner (``num_cpus_per_env_runner``,
    RLlib's default 1), so a runner never uses more cores than its resource request says."""
    return max(1, int(num_cpus or 1))
