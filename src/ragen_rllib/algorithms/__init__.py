"""RLlib algorithms of ragen-rllib (one sub-package per algorithm, laid out like ``ray.rllib.algorithms``)."""
