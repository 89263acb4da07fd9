"""``python -m reference_agent``: see :mod:`reference_agent.cli`."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
