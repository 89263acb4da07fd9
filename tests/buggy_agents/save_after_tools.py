"""Known-buggy agent: saves once per turn, after the turn's tools ran (the most common loop).

Its keys are right, made from the task and the ``tool_use`` id, and its tools honour them;
but the reply that asked for the calls is saved only with their results. A crash between
an effect and that save makes it ask the model the same again, and the API answers with
new ids, so the call comes back under a new key and happens twice. Caught by
``no_duplicate_effect`` (the scripted model gives a history asked again fresh ids, as the
API does), whose report says to save the reply before running its tools.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(save_after_tools=True))
