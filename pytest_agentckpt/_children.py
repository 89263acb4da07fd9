"""Child processes that start fast: one context for process mode and certify's experiments.

On Linux, children are forked from a fork server (``multiprocessing``'s ``forkserver``
start method) that has imported the heavy modules once; a child then starts in
milliseconds instead of importing the SDK, the stores and Hypothesis again (about half a
second each). A fork server is a fresh single-threaded process, so the parent's threads
(a database driver's, pytest-xdist's) are never forked. Each child still gets the parent's
``sys.path``, working directory and main module at its start, as with ``spawn``, so what
``spawn`` can import it can too; :func:`with_environment` gives it the parent's environment
variables as they are at its start (a fork server's children would otherwise have the
environment the server started with). Elsewhere, ``spawn``.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, SpawnContext

#: Imported once by the fork server. Certify's modules are here too: a fork server
#: started by either use then serves both (it reads this list once, when it starts).
PRELOAD = (
    "anthropic",
    "httpx2",
    "stores",
    "reference_agent.world",
    "pytest_agentckpt.faults",
    "pytest_agentckpt._process",
    "pytest_agentckpt.certify.crash",
    "pytest_agentckpt.certify.concurrency",
    "pytest_agentckpt.certify.sharing",
)
_requested: list[str] = list(PRELOAD)


def process_context(*modules: str) -> ForkServerContext | SpawnContext:
    """The context to start children with; ``modules`` are imported by the fork server too
    (if it has not started yet: it imports what was asked for before its start)."""
    if not sys.platform.startswith("linux"):
        return multiprocessing.get_context("spawn")
    for module in modules:
        if module and module not in _requested:
            _requested.append(module)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_requested))
    return context


def with_environment(target: Callable[..., Any], *, ignore_interrupt: bool = False) -> Callable[..., None]:
    """``target`` to run in a child, with the environment variables the parent has now:
    a store factory that reads its URL from the environment, an agent that reads its
    settings, see what a test set a moment ago (``monkeypatch.setenv``), as with ``spawn``.

    ``ignore_interrupt``: the child ignores SIGINT. A Ctrl-C in a terminal reaches the
    whole process group; a child the parent stops (and kills) itself must not die of it
    mid-write, with a traceback, before the parent's clean-up has seen what it wrote."""
    return functools.partial(_in_environment, dict(os.environ), ignore_interrupt, target)


def _in_environment(
    environ: dict[str, str], ignore_interrupt: bool, target: Callable[..., Any], *args: Any, **kwargs: Any
) -> None:
    if ignore_interrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(environ)
    target(*args, **kwargs)
