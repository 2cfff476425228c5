"""Tests of the train steps, steps/ (hookbus.steps)."""
