"""``python -m reference_agent``: see :mod:`reference_agent.cli`."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    try:
        from .cli import main
    except KeyboardInterrupt:  # Ctrl-C while the modules load: nothing ran yet
        print("interrupted (Ctrl-C) while starting: nothing was done", file=sys.stderr)
        sys.exit(130)
    sys.exit(main())
