"""Helpers for tests of code built on this package: fault injection into envs."""
