"""Turn-based multi-agent text envs (PettingZoo AEC): the contract, tic-tac-toe and the cooperative pairs."""
