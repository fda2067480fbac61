"""The object-store weight payload: every dtype round-trips exactly, tied tensors are stored once, and a
runner reads the arrays Ray hands it without copying them."""

import numpy as np
import pytest
import ray
import torch

from ragen_rllib.core.weight_sync import PACKED, pack_weights, unpack_weights


def test_pack_round_trips_every_dtype_and_stores_tied_tensors_once():
    tied = torch.randn(5, 3)
    state = {"embed.weight": tied, "lm_head.weight": tied, "norm.weight": torch.randn(3, dtype=torch.bfloat16),
             "scale": torch.tensor(2.5, dtype=torch.float16), "t": torch.randn(4, 2).t()}  # non-contiguous
    payload = pack_weights(state)
    assert len(payload["arrays"]) == 4 and all(a.dtype == np.uint8 for a in payload["arrays"])
    out = unpack_weights(payload)
    assert list(out) == list(state)
    for name, tensor in state.items():
        assert out[name].dtype == tensor.dtype and out[name].shape == tensor.shape
        assert torch.equal(out[name], tensor), name


def test_unpack_passes_plain_mappings_through():
    state = {"w": torch.ones(2)}
    assert unpack_weights(state) == state and PACKED not in state


@pytest.mark.slow
def test_a_reader_of_the_object_store_gets_views_not_copies(ray_session):
    state = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4)}
    payload = ray.get(ray.put(pack_weights(state)))
    (array,) = payload["arrays"]
    assert not array.flags.writeable  # backed by Ray's shared memory: a zero-copy read
    out = unpack_weights(payload)
    assert out["w"].data_ptr() == array.ctypes.data
    assert torch.equal(out["w"], state["w"])

