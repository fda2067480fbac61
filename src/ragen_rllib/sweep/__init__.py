"""Ray Tune sweeps: the search space, the run, its resumable state and the report."""
