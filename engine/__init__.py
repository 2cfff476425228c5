"""The kernel of hookbus (``hookbus.engine``), in rooms by concern, lowest first:

- the base, here: the errors the command line turns into one line (``errors``), bounded
  reads of a user's files (``bounded_files``, ``folder_walk``), name registries
  (``registry``) and the base of every config section (``section``);
- ``methods``: the SSL method entries as declared data, and their composition rules;
- ``config``: the config's sections, reading a recipe, and what may change on resume;
- ``bus``: the SSL events, the bus engine, the Hook base class and its priorities, the
  run state and the phase plan;
- ``process``: the process's settings, the launch environment and distributed helpers;
- ``checkpoint``: checkpoint files, what they carry, and the run directory's files.

A room imports only from its own room and those listed above it. Nothing here imports
the parts, hooks, steps or the trainer; the public API is importable from :mod:`hookbus`.
"""
