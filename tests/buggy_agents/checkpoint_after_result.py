"""Known-buggy agent: checkpoints after a tool's result instead of around its effect.

No intent is recorded before an irreversible call, so a crash after the effect and before
the next save makes the resumed agent perform it again, though the model asked once.
Caught by ``no_duplicate_effect``.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(checkpoint_after_result=True))
