"""``python -m hookbus``: the ``hookbus`` command (``torchrun -m hookbus train ...``)."""

from __future__ import annotations

import sys

from hookbus.cli import main

sys.exit(main())
