"""The checkpoint storage room: checkpoint files written atomically and loaded safely
(``checkpoint_io``, ``checkpoint_writer``), sharded checkpoints and their files
(``sharded_checkpoint``, ``shard_files``), what a checkpoint carries and whether it fits
the run (``training_state``, ``checkpoint_contents``), and the run directory's own files:
writes that follow no link out (``run_files``), the one-process lock (``run_lock``), the
work still owed after the last step (``end_of_run``) and the run's curves, kept as JSON
and drawn as a PNG (``run_curves``).
"""
