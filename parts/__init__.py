"""The task's parts, built from the config (``hookbus.parts``): data, models, losses,
meters and optimizers, each with its registry, and :mod:`hookbus.parts.task`, which
builds them onto the run state. Parts import from the kernel (``hookbus.engine``) only.
"""
