"""The agent layer between text environments and an LLM: prompts, response parsing, action execution,
token-exact transcripts and the batched multi-turn rollout loop.

It knows environments (through the gymnasium contract of :mod:`ragen_rllib.envs`) and engines (through
:class:`ragen_rllib.engines.base.GenerationEngine`), and nothing of RLlib.
"""
