"""``python -m hookbus.reference [ROOT]``: write the generated reference pages under ROOT."""

from __future__ import annotations

import sys
from pathlib import Path

from hookbus.reference import write_reference_pages

if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path()
    for path in write_reference_pages(root):
        print(f"wrote {path}")
