"""Tests of the runner, hookbus/: the trainer, the command line, export and embed."""
