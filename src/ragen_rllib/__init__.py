"""ragen-rllib: multi-turn LLM agents trained with RL (RAGEN's StarPO) as a Ray RLlib plugin."""

__version__ = "0.1.0"
