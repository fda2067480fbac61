"""The commands' machinery: a training run, its resources and loggers, Ray start-up and reaping, the env server."""
