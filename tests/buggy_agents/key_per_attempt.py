"""Known-buggy agent: draws a fresh idempotency key for every call of a tool.

It records intents and re-runs a keyed intent on resume, as it should, but the key is
random, so the service cannot tell the re-run from a new call and does it again. Caught
by ``no_duplicate_effect``, whose report says the calls came with different keys.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(key_per_attempt=True))
