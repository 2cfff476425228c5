"""Code the documentation's tutorials include, run by the test suite
(tests/runner/test_tutorial_*.py).

Installed with the distribution as ``hookbus.examples`` (``setup.cfg`` maps it onto this
folder), so the tutorials' code imports from anywhere:
``from hookbus.examples.grad_norm_hook import GradNormHook``. Each module registers what it
defines, so that a recipe can use it by name after
``trainer.imports: [hookbus.examples.<module>]``.
"""
