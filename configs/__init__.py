"""The shipped recipes, installed as ``hookbus.recipes``: one YAML file each.

This folder holds no code. It is a package only so that the recipes install with the
distribution (``setup.cfg`` maps ``hookbus.recipes`` onto ``configs/`` and ships its
``*.yaml`` as package data) and can be read with
``importlib.resources.files("hookbus.recipes")``, from a wheel and from an editable
install alike. ``hookbus recipes`` lists them; ``hookbus train NAME`` runs one by name.
"""
