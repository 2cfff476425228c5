"""hookbus's standard handlers, one module per concern (``hookbus.hooks``).

:mod:`hookbus.hooks.registry` holds the registry that ``hooks.extra`` names look up;
:mod:`hookbus.hooks.defaults` assembles the hook set a config asks for, and is the only
module here that imports the others. ``hooks/methods/`` holds the SSL methods' hooks.
"""
