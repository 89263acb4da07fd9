"""pytest-agentckpt: prove that LLM agents survive crashes.

The public surface lives here; internals are in the submodules. Importing this package
is light: nothing heavy is imported until it is used.
"""

from __future__ import annotations

__all__: list[str] = []
