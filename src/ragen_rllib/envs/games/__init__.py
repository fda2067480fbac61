"""Single-agent text games: FrozenLake, Sokoban, Bandit, Countdown, MetaMathQA, Sudoku, 2048, Rubik's cube."""
