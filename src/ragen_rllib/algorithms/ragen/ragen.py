"""Ragen: StarPO (RAGEN) as an RLlib Algorithm.

One ``training_step`` = sample (every env runner in parallel, one multi-turn rollout over its env groups)
-> learner update (old log-probs, advantages, clipped surrogate over minibatches and epochs) -> weight
sync into every runner's generation engine (checked: a sync is never silently dropped) -> metrics.
With ``rollout_mode="one_step_off"`` the next batch is sampled while the learner trains (:mod:`.driver.one_step_off`).
"""

from __future__ import annotations

import functools
import logging
import time
from pathlib import Path

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, LEARNER_RESULTS, TIMERS

from ragen_rllib.algorithms.ragen.driver.batch import padding_fraction
from ragen_rllib.algorithms.ragen.driver.checkpoint_io import write_atomically
from ragen_rllib.algorithms.ragen.driver.early_stop import EarlyStopper
from ragen_rllib.algorithms.ragen.driver.modules import Prepared, module_updates, prepare
from ragen_rllib.algorithms.ragen.driver.one_step_off import (
    Collected,
    NoHealthyRunners,
    Prefetcher,
    dumps,
    loads,
    staleness,
    timeline,
)
from ragen_rllib.algorithms.ragen.driver.rollout_filter import varied_groups
from ragen_rllib.algorithms.ragen.driver.rollout_metrics import rollout_metrics
from ragen_rllib.algorithms.ragen.driver.runner_failures import assign_blocks
from ragen_rllib.algorithms.ragen.driver.trace import batch_trace, learner_trace, write_trace
from ragen_rllib.algorithms.ragen.ragen_config import RagenConfig
from ragen_rllib.core import keys as K
from ragen_rllib.core.env_tags import split_groups
from ragen_rllib.core.weight_sync import ObjectStoreWeightSync, WeightSync

__all__ = ["Ragen", "RagenConfig"]

logger = logging.getLogger(__name__)


class WeightSyncError(RuntimeError):
    """An env runner did not take the latest weights."""


class Ragen(Algorithm):
    """The StarPO trainer (see the module docstring)."""

    #: how weights reach the engines (:mod:`ragen_rllib.core.weight_sync`; a CUDA path would be another WeightSync)
    weight_sync: WeightSync = ObjectStoreWeightSync()

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> RagenConfig:
        return RagenConfig()

    @override(Algorithm)
    def setup(self, config) -> None:
        # Ragen's own state first: super().setup() ends with the on_algorithm_init callback, which may restore
        # a checkpoint into it (RLlib's way to start a Tune trial from a checkpoint).
        self._step = 0
        self._weights_seq_no = 0  # weight syncs so far (what runners report)
        self._version = 0  # learner updates so far: the learner's weights version
        self._engine_version = 0  # the weights version the engines hold
        self._waiting: Collected | None = None  # one-step-off: the batch sampled during the last iteration
        self._prefetcher = Prefetcher() if config.rollout_mode == "one_step_off" else None
        self._stopper = EarlyStopper.from_config(self.config)
        self._round = 0  # sampling rounds so far: the seed schedule's step (= self._step without dynamic sampling)
        self._tokenizer = self._load_tokenizer()
        tok = self._tokenizer
        self._pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        super().setup(config)

    def _load_tokenizer(self):
        from transformers import AutoTokenizer

        from ragen_rllib.models.registry import resolve_model

        return AutoTokenizer.from_pretrained(resolve_model(self.config.model_name))

    # ------------------------------------------------------------------ one iteration
    @override(Algorithm)
    def training_step(self) -> None:
        """Sample (or take the batch sampled during the last iteration, one-step-off), learn, sync; see
        :mod:`.driver.one_step_off` for the overlapped order. Phase durations and their timeline go to ``timers``."""
        start, cfg = time.perf_counter(), self.config
        overlapped = cfg.rollout_mode == "one_step_off"
        collected, self._waiting = self._waiting, None
        spans: dict[str, tuple[float, float] | None] = {"sample": None, "weight_sync": None, "learn": None,
                                                        "prefetch": None, "wait": None}
        if collected is None:  # sync mode, the first one-step-off iteration, after a failed background sample
            collected = self._collect()
            spans["sample"] = (collected.start, collected.end)
        self.metrics.log_value((ENV_RUNNER_RESULTS, K.WEIGHTS_STALENESS), float(staleness(self._version, collected)),
                               window=1)
        kept = self._prepare(collected)
        if overlapped:  # the runners are idle: give them the newest weights, then sample the next batch
            if self._engine_version != self._version:
                spans["weight_sync"] = self._timed(self.sync_engine_weights)
            self._prefetcher.launch(functools.partial(self._collect, background=True))
        if kept:
            spans["learn"] = self._timed(lambda: self._learn(kept))
            if not overlapped:
                spans["weight_sync"] = self._timed(self.sync_engine_weights)
        if overlapped:
            wait_start = time.perf_counter()
            self._waiting, _ = self._prefetcher.wait()
            spans["wait"] = (wait_start, time.perf_counter())
            if self._waiting is not None:
                spans["prefetch"] = (self._waiting.start, self._waiting.end)
        self._step += 1
        duration = {phase: (span[1] - span[0]) if span else 0.0 for phase, span in spans.items()}
        timers = {"ragen_sample_s": duration["sample"] + duration["prefetch"], "ragen_learn_s": duration["learn"],
                  "ragen_weight_sync_s": duration["weight_sync"], "ragen_wait_s": duration["wait"],
                  **timeline(start, **spans)}
        self.metrics.log_dict(timers, key=TIMERS, window=1)

    @staticmethod
    def _timed(fn) -> tuple[float, float]:
        begin = time.perf_counter()
        fn()
        return begin, time.perf_counter()

    def _prepare(self, collected: Collected):
        """Metrics of a collected batch, then reward shaping and filtering: (trajectories to train on, filter
        metrics). Feeds the early stopper."""
        cfg = self.config
        self._log_sampling(collected, validation=False)
        rollout = rollout_metrics(collected.sampled, collected.seconds)
        self.metrics.log_dict({**rollout, **collected.extra}, key=ENV_RUNNER_RESULTS, window=1)
        if cfg.mi_interval and self._step % cfg.mi_interval == 0:
            self.metrics.log_dict(self._reasoning_mi(collected.sampled), key=ENV_RUNNER_RESULTS, window=1)
        prepared = prepare(collected.kept, cfg)  # each module's reward shaping and group filter
        self._stopper.on_step(rollout.get(K.IN_GROUP_REWARD_STD_MEAN),
                              empty=cfg.filter_strategy is not None and not prepared)
        self.metrics.log_dict(prepared.metrics, key=ENV_RUNNER_RESULTS, window=1)
        if cfg.filter_strategy is not None:
            self.metrics.log_value((ENV_RUNNER_RESULTS, K.FILTER_EMPTY_BATCHES), float(not prepared), reduce="sum")
        return prepared

    def _learn(self, prepared: Prepared) -> None:
        """One learner update per trained module on its kept trajectories (the weights version goes up by one);
        with ``trace_dir``, what each module trained on and its losses go to a trace file (:mod:`.driver.trace`)."""
        traces = {}
        for update in module_updates(prepared, self._pad_id, self.config):
            rows = len(update.batch[K.INPUT_IDS])
            learner_results = self.learner_group.update(
                batch=MultiAgentBatch({update.module_id: SampleBatch(update.batch)}, env_steps=rows),
                minibatch_size=update.minibatch_size,
                num_epochs=update.num_epochs,
                shuffle_batch_per_epoch=True,
                num_total_minibatches=update.num_total_minibatches,
                timesteps={K.TRAINING_STEP: self._step},  # the learners' lr schedule (lr_warmup_steps, lr_decay)
            )
            self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)
            self.metrics.log_value((LEARNER_RESULTS, update.module_id, K.PADDING_FRACTION),
                                   padding_fraction(update.batch), window=1)
            if self.config.trace_dir:
                traces[update.module_id] = {**batch_trace(update.batch),
                                            "learner": learner_trace(self.metrics, (LEARNER_RESULTS, update.module_id))}
        if self.config.trace_dir:
            write_trace(self.config.trace_dir, self._step, traces)
        self._version += 1

    def _reasoning_mi(self, trajectories) -> dict[str, float]:
        """RAGEN-2's mutual-information estimate, scored by the first env runner's engine."""
        from ragen_rllib.algorithms.ragen.driver.reasoning_mi import reasoning_mi_metrics

        def score(prompts, conts):
            return self.env_runner_group.foreach_env_runner(lambda r: r.engine.score(prompts, conts),
                                                            remote_worker_ids=[1], local_env_runner=False)[0]

        return reasoning_mi_metrics(trajectories, self.config.mi_samples, self._tokenizer.decode, score)

    def _collect(self, background: bool = False) -> Collected:
        """One sampling round (seeds of round ``self._round``); with ``dynamic_sampling`` (DAPO) groups whose
        rewards are all equal are dropped and more rounds are sampled, at most ``dynamic_sampling_max_rounds``,
        until ``env_groups`` groups remain. Logs nothing (it may run on the sampling thread)."""
        cfg, version, begin = self.config, self._engine_version, time.perf_counter()
        first = self._sample(self._round, validation=False, background=background)
        self._round += 1
        first.version, first.start = version, begin
        if not cfg.dynamic_sampling:
            first.end = time.perf_counter()
            return first
        sampled, kept, rounds = list(first.sampled), varied_groups(first.sampled), 0
        while len({t.group_id for t in kept}) < cfg.env_groups and rounds < cfg.dynamic_sampling_max_rounds:
            more = self._sample(self._round, validation=False, background=background)
            self._round += 1
            rounds += 1
            first.seconds += more.seconds
            first.runner_metrics += more.runner_metrics
            first.lost, first.resampled = first.lost + more.lost, first.resampled + more.resampled
            sampled += more.sampled
            kept += varied_groups(more.sampled)
        groups = set(list(dict.fromkeys(t.group_id for t in kept))[:cfg.env_groups])  # first come, first kept
        first.sampled, first.kept = sampled, [t for t in kept if t.group_id in groups]
        first.extra = {K.DYNAMIC_SAMPLING_ROUNDS: float(rounds), K.DYNAMIC_SAMPLING_GROUPS: float(len(groups))}
        first.end = time.perf_counter()
        return first

    def _log_sampling(self, collected: Collected, validation: bool) -> None:
        """The runners' own metrics (RLlib's step counters, error counts) and the lost-group counts."""
        self.metrics.aggregate(collected.runner_metrics, key=ENV_RUNNER_RESULTS)
        if not validation:
            self.metrics.log_dict({K.GROUPS_LOST: collected.lost, K.GROUPS_RESAMPLED: collected.resampled},
                                  key=ENV_RUNNER_RESULTS, window=1)

    def _sample(self, step: int, validation: bool, background: bool = False) -> Collected:
        """One rollout of every block of env groups (at most ``sample_timeout_s`` per round). A runner that dies
        mid-sample loses its block: with ``on_runner_failure="resample"`` it is sampled again on the healthy
        runners in this call (counted in ``groups_lost`` and ``groups_resampled``); when no runner is healthy,
        Ray's restarts are awaited for up to ``env_runner_health_probe_timeout_s`` (in the foreground; a
        ``background`` sample raises :class:`NoHealthyRunners` instead, as restores push weights)."""
        cfg, group = self.config, self.env_runner_group
        start, timeout = time.perf_counter(), cfg.sample_timeout_s
        sizes = [len(block) for block in split_groups(cfg.val_tags if validation else cfg.train_tags,
                                                      cfg.num_env_runners)]
        pending, sampled, metrics, lost, resampled = list(range(cfg.num_env_runners)), {}, [], 0, 0
        retry = False  # whether this round samples groups lost in an earlier one
        while pending:
            if not group.healthy_env_runner_ids():  # all down (e.g. their node died): await Ray's restarts
                if background:
                    raise NoHealthyRunners("no healthy env runner")
                deadline = time.monotonic() + cfg.env_runner_health_probe_timeout_s
                while not self.restore_env_runners(group) and time.monotonic() < deadline:
                    time.sleep(1.0)
            plan = assign_blocks(pending, group.healthy_env_runner_ids())
            ids = list(plan)
            results = group.foreach_env_runner(
                [functools.partial(_sample_blocks, step=step, validation=validation, blocks=plan[i]) for i in ids],
                remote_worker_ids=ids, local_env_runner=False, timeout_seconds=timeout)
            for per_block, runner_metrics in results:
                sampled.update(per_block)
                metrics.append(runner_metrics)
            if retry:
                resampled += sum(sizes[b] for b in pending if b in sampled)
            missing = [b for b in pending if b not in sampled]
            healthy = group.healthy_env_runner_ids()
            late = [i for i in ids if i in healthy and any(b in missing for b in plan[i])]
            if late:  # alive but silent: a timeout, not a failure
                raise TimeoutError(f"env runner(s) {late} sent no rollout within sample_timeout_s={timeout}; raise "
                                   "it with .env_runners(sample_timeout_s=...)")
            lost += sum(sizes[b] for b in missing)
            pending, retry = (missing if cfg.on_runner_failure == "resample" else []), True
        trajectories = [t for block in sorted(sampled) for t in sampled[block]]
        seconds = time.perf_counter() - start
        return Collected(trajectories, trajectories, seconds, {}, runner_metrics=metrics, lost=float(lost),
                         resampled=float(resampled), version=self._engine_version, start=start, end=start + seconds)

    # ------------------------------------------------------------------ weights
    def sync_engine_weights(self) -> int:
        """Push the learner's weights (HF names, model dtype) into every runner's engine; verify the seq no."""
        self._weights_seq_no += 1
        seq = self._weights_seq_no
        got = self._push_weights(seq)
        if any(g != seq for g in got) or len(got) != self.env_runner_group.num_healthy_remote_workers():
            raise WeightSyncError(f"weight sync {seq} not taken by every env runner: they report {got}")
        self._engine_version = self._version
        return seq

    def _push_weights(self, seq: int, runner_ids: list[int] | None = None) -> list[int]:
        """The first learner's weights into the engines of ``runner_ids`` (default: all) under ``seq``
        (:attr:`weight_sync`); returns the runners' seq nos."""
        return self.weight_sync.push(self.learner_group, self.env_runner_group, seq, runner_ids)

    @override(Algorithm)
    def restore_env_runners(self, env_runner_group) -> list[int]:
        # RLlib's hook for custom EnvRunners (it runs before every training_step). Its default sends a restarted
        # runner the learners' RLModule state through the env-to-module connectors; a Ragen runner needs the
        # learner's current weights in its engine, under the current weights_seq_no, before it samples.
        restored = env_runner_group.probe_unhealthy_env_runners()
        if restored:
            # the counter RLlib's own restore_env_runners keeps (Algorithm has no public way to add to it)
            self._counters["total_num_restored_workers"] += len(restored)
            got = self._push_weights(self._weights_seq_no, restored)
            if any(g != self._weights_seq_no for g in got):
                raise WeightSyncError(f"restored env runners {restored} report weights {got}, not "
                                      f"{self._weights_seq_no}")
            logger.warning("env runner(s) %s restarted and took weights %s", restored, self._weights_seq_no)
        self.metrics.log_value((ENV_RUNNER_RESULTS, K.RUNNERS_RESTORED), float(len(restored)), reduce="sum")
        return restored

    @override(Algorithm)
    def save_to_path(self, path=None, *, state=None, filesystem=None, use_msgpack=False) -> str:
        """RLlib's checkpoint, written atomically on a local file system: into a sibling temp directory,
        then renamed onto ``path``. A process killed mid-save leaves ``path`` as it was (absent or the previous
        checkpoint), never half-written."""
        if path is None or filesystem is not None:  # a new temp dir, or a remote file system: RLlib's own way
            return super().save_to_path(path, state=state, filesystem=filesystem, use_msgpack=use_msgpack)
        return write_atomically(Path(path), lambda tmp: super(Ragen, self).save_to_path(
            tmp, state=state, use_msgpack=use_msgpack))

    @override(Algorithm)
    def restore_from_path(self, path, *args, **kwargs):
        super().restore_from_path(path, *args, **kwargs)
        # The restore may hand the runners a newer weights_seq_no (a PBT donor's, from its checkpoint) than this
        # algorithm's counter: continue above every runner's, or the runners would ignore the sync as stale.
        seqs = self.env_runner_group.foreach_env_runner(lambda runner: runner.weights_seq_no, local_env_runner=False)
        self._weights_seq_no = max([self._weights_seq_no, *seqs])
        self.sync_engine_weights()  # engines still hold the weights they had before the restore
        self.restored_from = str(path)  # the last checkpoint loaded (a resume, a PBT exploit)

    # ------------------------------------------------------------------ validation
    @classmethod
    @override(Algorithm)
    def _should_create_evaluation_env_runners(cls, eval_config) -> bool:
        # Private hook, the only switch that keeps RLlib from building evaluation runners (each would load its
        # own engine): validation runs on the training runners' engines instead (see evaluate()).
        return False

    @override(Algorithm)
    def evaluate(self, parallel_train_future=None) -> dict:
        """Validation rollout on fixed seeds at the validation temperature (``result["evaluation"]``), with the
        learner's current weights (one-step-off: synced first, as the engines are one update behind)."""
        if self._engine_version != self._version:
            self.sync_engine_weights()
        collected = self._sample(self._step, validation=True)
        self._log_sampling(collected, validation=True)
        metrics = rollout_metrics(collected.sampled, collected.seconds)
        if K.SUCCESS_RATE in metrics:
            self._stopper.on_validation(metrics[K.SUCCESS_RATE])
        return {ENV_RUNNER_RESULTS: metrics}

    # ------------------------------------------------------------------ early stops
    @override(Algorithm)
    def step(self) -> dict:
        """One iteration; adds ``early_stopped/<rule>`` and ends training (``done``) when a rule fired; with
        ``val_before_train``, the first iteration also reports ``evaluation_before_training``."""
        before = self.evaluate() if self.config.val_before_train and self.iteration == 0 else None
        result = super().step()
        if before is not None:
            result["evaluation_before_training"] = before
        result.update(self._stopper.metrics())
        if self._stopper.triggered is not None:
            result["done"] = True
        return result

    # ------------------------------------------------------------------ checkpoint extras
    @override(Algorithm)
    def get_state(self, *args, **kwargs):
        state = super().get_state(*args, **kwargs)
        state["ragen_step"] = self._step
        state["ragen_early_stop"] = self._stopper.get_state()
        state["ragen_round"] = self._round
        state["ragen_versions"] = (self._version, self._engine_version)
        state["ragen_waiting"] = dumps(self._waiting)  # one-step-off: the batch the next iteration trains on
        return state

    @override(Algorithm)
    def set_state(self, state) -> None:
        super().set_state(state)
        self._step = int(state.get("ragen_step", self._step))
        self._stopper.set_state(state.get("ragen_early_stop", {}))
        self._round = int(state.get("ragen_round", self._step))
        self._version, self._engine_version = state.get("ragen_versions", (self._step, self._step))
        self._waiting = loads(state.get("ragen_waiting"))
        if self._waiting is not None and self._prefetcher is None:
            logger.warning("the checkpoint holds a batch sampled ahead (rollout_mode='one_step_off'); this run is "
                           "rollout_mode='sync' and trains on it first")

    @override(Algorithm)
    def cleanup(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
        super().cleanup()


def _sample_blocks(runner, *, step: int, validation: bool, blocks: list[int]):
    """On an env runner: ``{block: trajectories}`` for each block, and the runner's metrics."""
    return {b: runner.sample(step=step, validation=validation, block=b) for b in blocks}, runner.get_metrics()
