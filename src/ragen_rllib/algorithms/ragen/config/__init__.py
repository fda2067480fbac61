"""The config plumbing of Ragen: hyperparameters (the one home of each default), algorithm presets, config files
and dotted key paths."""
