"""The bus and hooks' room: the SSL events (``events``), the ignite engine that fires
them (``bus_engine``, with ``handler_order``), the Hook base
class (``hook``) and its named priorities (``priorities``), the run state hooks read and
write (``state``, ``run_engine``), the phase plan (``phases``), the metric names hookbus
keeps (``metric_names``), finding an ignite LR scheduler (``lr_scheduler``), and the
test kit that runs a hook without a training loop (``testing``).
"""
