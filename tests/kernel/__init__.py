"""Tests of the kernel, engine/ (hookbus.engine): the bus, run state, config, checkpoint IO."""
