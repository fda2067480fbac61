"""Evaluation on fixed seeds, and the transcript viewer."""
