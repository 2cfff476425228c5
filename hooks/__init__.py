"""hookbus's standard handlers, one module per concern (``hookbus.hooks``): every module
here registers a hook (:mod:`hookbus.engine.bus.hook_registry`, the names ``hooks.extra``
looks up), and ``hooks/methods/`` holds the SSL methods' hooks. What they share lives on
the floors below (the run state's summaries in :mod:`hookbus.engine.bus.run_stats`, the
run curves in :mod:`hookbus.engine.checkpoint.run_curves`, a method hook's queue in
:mod:`hookbus.parts.losses.ring_buffer`); the hook set a config asks for is assembled
above them, in :mod:`hookbus.hook_set`.
"""
