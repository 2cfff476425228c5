"""The kernel of hookbus (``hookbus.engine``): events, the bus, the Hook base class and
its priorities, the run state, the config and its YAML, registries, checkpoint files,
process settings and distributed helpers. Nothing here imports the parts, hooks, steps
or the trainer; the public API is importable from :mod:`hookbus` itself.
"""
