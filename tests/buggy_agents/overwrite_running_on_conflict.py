"""Known-buggy agent: answers a lost compare-and-set by saving its own state on top,
unless the newer version is completed.

The write-ahead ledger, the keys and the repair are right, and a worker that finds the
task finished by another backs off. But it checks the status, not the version: a worker
that was only paused while another took its task over, and wakes up while that other
worker is still running it, erases the other's work. ``takeover`` catches it only when
the two workers interleave mid-run (worker A woken while B runs the task).
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(overwrite_running_on_conflict=True))
