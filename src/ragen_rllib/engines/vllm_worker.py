"""vLLM worker extension: reload weights in a live engine (works on CPU and GPU).

``model.load_weights`` fails on vLLM-CPU (weights are repacked for oneDNN after loading); the worker's
``reload_weights`` works, layer by layer. Two payloads:
  - a mapping of tensors, when the engine runs in this process (vLLM-CPU's default here): no copy at all;
  - safetensors bytes, when the engine core is another process: bytes travel safely over vLLM's RPC in both
    engine modes (tuples of tensors do not).
"""

from __future__ import annotations

from collections.abc import Mapping


class WeightReloadExtension:
    """Mixed into vLLM's worker via ``LLM(worker_extension_cls=...)``."""

    def ragen_reload_weights(self, payload: bytes | Mapping) -> int:
        if isinstance(payload, (bytes, bytearray)):
            from safetensors.torch import load

            payload = load(payload)
        self.reload_weights(weights_iterator=iter(payload.items()))
        return len(payload)
