"""The processes' room: what a training process sets before it builds anything
(``machine``, ``threads``), where it stands in a launch (``launch_env``, ``slurm_env``,
``slurm_hosts``), the process group's helpers (``distributed``), and the signals that
ask it to stop at the next step boundary (``preemption``).
"""
