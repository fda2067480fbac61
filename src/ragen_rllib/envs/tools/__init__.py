"""Envs that offer tools: the ToolEnv contract, SearchQA and BFCL multi-turn."""
