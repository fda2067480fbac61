"""How the learner's weights reach the env runners' engines: one interface, one implementation here.

:class:`ObjectStoreWeightSync` (used on every machine today): the first learner takes its module's weights with
Hugging Face names (LoRA merged in), on CPU, and puts them into Ray's object store itself, in its own process;
the driver only passes the ObjectRef on, and every runner fetches the weights from the object store and loads
them into its engine. No device tensor and no weight payload goes through the driver (with a local learner,
``num_learners=0``, the learner is the driver process). The weights travel as flat byte arrays
(:func:`pack_weights`): Ray hands numpy arrays to every reader without a copy (torch tensors are copied on
``ray.get``), so a runner reads them straight from shared memory, and tied tensors are stored once.

A CUDA implementation would replace the object store by a direct path, as verl and SkyRL do:
  - NCCL broadcast: a process group spanning learner rank 0 and every engine's GPU worker, created at build;
    the engines receive into their model parameters through vLLM's ``worker_extension_cls`` and a collective
    RPC, bucket by bucket (a few hundred MB each) so no full second copy is needed;
  - CUDA IPC: when an engine shares the learner's GPU, IPC handles of the learner's tensors instead of a copy;
  - either way the sync number (``weights_seq_no``) and the check that every runner took it stay as here.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Mapping

import numpy as np
import ray
import torch

PACKED = "ragen_packed_weights"  # marks a payload made by pack_weights


class WeightSync(abc.ABC):
    """Moves the learner's current weights into the engines of chosen env runners."""

    @abc.abstractmethod
    def push(self, learner_group, env_runner_group, seq: int, runner_ids: list[int] | None = None) -> list[int]:
        """Load the weights into the engines of ``runner_ids`` (default: all healthy runners) under sync number
        ``seq``; returns the sync number each runner reports afterwards."""


def pack_weights(state: Mapping[str, torch.Tensor]) -> dict:
    """CPU tensors -> ``{PACKED: [(name, index, dtype, shape)], "arrays": [uint8 arrays]}``.

    Each distinct storage becomes one flat ``uint8`` numpy array (any dtype, bf16 included); names sharing a
    tensor (tied embeddings) share its array. Arrays are views of the tensors where they are contiguous.
    """
    entries, arrays, index_of = [], [], {}
    for name, tensor in state.items():
        tensor = tensor.detach().cpu().contiguous()
        key = (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape))
        if key not in index_of:
            index_of[key] = len(arrays)
            arrays.append(tensor.reshape(-1).view(torch.uint8).numpy())
        entries.append((name, index_of[key], str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape)))
    return {PACKED: entries, "arrays": arrays}


def unpack_weights(payload: Mapping) -> dict[str, torch.Tensor]:
    """The inverse of :func:`pack_weights`: tensors that view the payload's arrays (no copy; read-only when the
    arrays come from Ray's object store, which is all a weight load needs). Other mappings pass through."""
    if PACKED not in payload:
        return dict(payload)
    with warnings.catch_warnings():  # read-only object-store arrays: torch warns, the tensors are only read
        warnings.simplefilter("ignore", UserWarning)
        flat = [torch.from_numpy(np.asarray(a)) for a in payload["arrays"]]
    return {name: flat[i].view(getattr(torch, dtype)).reshape(shape)
            for name, i, dtype, shape in payload[PACKED]}


def _put_weights(learner) -> dict:
    """In the learner's process: each module's weights (HF names, CPU tensors) into the object store; returns
    ``{module_id: ref}``."""
    return {module_id: ray.put(pack_weights(module.unwrapped().hf_state_dict()))
            for module_id, module in learner.module.items()}


class ObjectStoreWeightSync(WeightSync):
    """Weights through Ray's object store, put by the learner itself (see the module docstring)."""

    def push(self, learner_group, env_runner_group, seq: int, runner_ids: list[int] | None = None) -> list[int]:
        results = learner_group.foreach_learner(_put_weights,
                                                remote_actor_ids=None if learner_group.is_local else [0])
        refs = next(iter(results)).get()  # every DDP learner holds the same weights: the first one's
        # each module's weights into that module's engine only (a multi-agent run has one engine per module)
        return env_runner_group.foreach_env_runner(lambda runner: _load_all(runner, refs, seq),
                                                   remote_worker_ids=runner_ids, local_env_runner=False)


def _load_all(runner, refs: dict, seq: int) -> int:
    """On an env runner: each module's weights into its own engine; the runner's sync number afterwards."""
    for module_id, ref in refs.items():
        runner.load_weights(ref, seq, module_id)
    return runner.weights_seq_no
