"""Tests of the hooks, hooks/ (hookbus.hooks), one file per hook or concern."""
