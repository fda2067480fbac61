"""RLlib EnvRunners of ragen-rllib (like ``ray.rllib.env``): multi-turn LLM rollouts over text envs."""
