"""Whole runs across the floors: subprocesses, torchrun, kills, the wheel, the docs."""
