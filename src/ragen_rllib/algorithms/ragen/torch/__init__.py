"""PyTorch parts of the Ragen algorithm: the LLM RLModule and the loss."""
