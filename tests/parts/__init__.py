"""Tests of the parts, parts/ (hookbus.parts): data, models, losses, meters, optimizers."""
