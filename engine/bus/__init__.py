"""The bus and hooks' room: the SSL events (``events``), the ignite engine that fires
them (``bus_engine``, with ``handler_order``), the Hook base class (``hook``), its named
priorities (``priorities``) and the registry of hooks by name (``hook_registry``), the
run state hooks read and write (``state``, ``run_engine``) and its read-only summaries
for the reporting hooks (``run_stats``), the phase plan (``phases``), the metric names
hookbus keeps (``metric_names``), finding an ignite LR scheduler (``lr_scheduler``), and
the test kit that runs a hook without a training loop (``testing``).
"""
