"""The client of an env served elsewhere (an OpenEnv server)."""
