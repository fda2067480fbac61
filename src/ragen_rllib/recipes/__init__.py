"""Recipes outside the library proper: the warm-started demo models and the env play demo, used by the examples,
benchmarks and the `demo` command."""
