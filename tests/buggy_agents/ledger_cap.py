"""Known-buggy agent: caps its write-ahead ledger, so its bug shows only late in a run.

It saves an intent before each irreversible call and the outcome after it, as the correct
loop does, for its first five irreversible calls; then its ledger is full (a cap meant to
bound the checkpoint's size on long tasks) and a further call goes unrecorded until the
save after its batch. A crash (or a store outage on that save) after such a call's effect
makes the resumed agent perform it again: ``no_duplicate_effect``.

The sixth irreversible call comes after the twelfth save at the earliest, the sixth tool
effect or later: occurrences drawn only from #1 to #6 almost never reach it, which is
why the fault plans also count occurrences from the end of the run.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

#: Irreversible calls the ledger records; the next ones go unrecorded.
LEDGER_CAP = 5

run = make_agent(Bugs(ledger_cap=LEDGER_CAP))
