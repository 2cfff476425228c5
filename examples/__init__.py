"""Code the documentation's tutorials include, run by the test suite (tests/test_tutorial_*.py).

Each module registers what it defines, so that a recipe can use it by name after
``trainer.imports: [examples.<module>]``.
"""
