"""What the env runners and the algorithm share: the batch columns and metric keys, the env tags (which envs a run
trains and validates on, and which runner holds which group), and the weight transport to the engines."""
