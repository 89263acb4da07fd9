"""Known-buggy agent: answers a lost compare-and-set by saving its own state on top.

The write-ahead ledger, the keys and the repair are right. But when a save raises
``ConflictError`` it loads the stored checkpoint for its version and saves its own state
with that version: the usual first "fix" of a conflict seen in production. A worker that
was only paused while another took its task over then erases the other's work, its
completion included. No single-worker run shows it; ``takeover`` catches it with
``no_lost_update``.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(overwrite_on_conflict=True))
