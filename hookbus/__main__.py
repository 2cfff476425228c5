"""``python -m hookbus``: the ``hookbus`` command (``torchrun -m hookbus train ...``).

``python -m`` puts the working directory at the front of ``sys.path``; it is taken off
here, before anything else is imported, so that a file in the working directory named
like a library (``yaml.py``, ``sklearn.py``) is never run, as with the ``hookbus``
command. Local modules are imported only when asked for: ``trainer.import_paths`` or
``PYTHONPATH``. (What Python itself imports before this line, it imports from wherever
``sys.path`` says; ``python -P -m hookbus`` leaves the working directory out from the start.)
"""

from __future__ import annotations

import os
import sys

if not getattr(sys.flags, "safe_path", False) and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from hookbus.cli import main  # after the working directory is taken off

sys.exit(main())
