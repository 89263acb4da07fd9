"""Known-buggy agent: repairs only when the last stored message is an assistant message.

It saves after each irreversible call, so a crash inside a parallel batch leaves a user
message with some of the results; this repair misses the others and the next request is
invalid. Caught by ``valid_sequence``.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(repair_only_if_last_assistant=True))
