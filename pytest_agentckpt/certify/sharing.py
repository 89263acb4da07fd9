"""Does the store's data cross processes? Asked of a child process, never assumed.

The process contracts (racing writers, SIGKILLed writers) judge what a child process
left in the store by loading it in the parent. If the child's saves never reach the
parent, every load finds nothing and those contracts saw no evidence at all: they are
*not checkable*, never passed. So before any of them runs, a child process makes its
own instance in a namespace, saves one checkpoint and stays alive while the parent looks
for it from an instance of its own (then once more after the child closed its store, for
stores that write on close).
"""

from __future__ import annotations

import contextlib
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

from stores import Checkpoint

from .._children import process_context, with_environment
from .context import CertifyContext, NotCheckable
from .factory import StoreFactory, new_namespace

__all__ = ["CROSS_PROCESS_NEEDS", "Sharing", "needs_cross_process", "probe_cross_process"]

#: How long the parent looks for the child's save while the child is alive.
LOOK_SECONDS = 3.0

CROSS_PROCESS_NEEDS = "instances in separate processes that share data"


@dataclass(frozen=True)
class Sharing:
    """What the probe saw: ``cross_process`` is True only if the parent loaded the child's save."""

    cross_process: bool
    how: str


def _probe_child(spec: str, namespace: str, task_id: str, conn: Any) -> None:
    """Child-process entry point: save one checkpoint, then do what the parent says."""
    warnings.simplefilter("ignore")  # the parent reports the store's warnings, once
    stage = "import"
    try:
        factory = StoreFactory.from_spec(spec)
        stage = "make"
        store = factory.make(namespace)
        stage = "save"
        store.save(Checkpoint(task_id=task_id, goal="saved by a child process"))
        stage = "later"
        conn.send("saved")
        if conn.poll(60) and conn.recv() == "close":
            store.close()
            conn.send("closed")
            if conn.poll(60) and conn.recv() == "delete":
                # Not seen by the parent: remove it wherever this process put it.
                again = StoreFactory.from_spec(spec).make(namespace)
                again.delete(task_id)
                again.close()
                conn.send("deleted")
    except BaseException:
        with contextlib.suppress(Exception):
            conn.send(f"error:{stage}:" + traceback.format_exc())


def _look(ctx: CertifyContext, namespace: str, task_id: str, seconds: float) -> bool:
    store = ctx.new_store(namespace)
    deadline = time.monotonic() + seconds
    while True:
        if store.load(task_id) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _expect(conn: Any, word: str, timeout: float = 60.0) -> None:
    if not conn.poll(timeout):
        raise TimeoutError(f"the probe process did not answer {word!r} within {timeout:.0f}s")
    answer = conn.recv()
    if isinstance(answer, str) and answer.startswith("error:"):
        stage, _, trace = answer[len("error:"):].partition(":")
        lines = trace.strip().splitlines()
        cause = lines[-1] if lines else "(no traceback)"
        what = {
            "import": "could not import the factory (the process contracts import it again in "
                      "child processes, so it must be importable by name, not defined in a "
                      "__main__ script)",
            "make": "imported the factory, but calling it to make a store failed",
            "save": "made a store from the factory, but its first save failed",
        }.get(stage, "failed while it worked with the store")
        raise RuntimeError(f"a child process {what}: {cause}\n{trace}")
    if answer != word:
        raise RuntimeError(f"the probe process answered {answer!r}, not {word!r}")


def probe_cross_process(ctx: CertifyContext) -> Sharing:
    """Spawn a child that saves; True if the parent then loads it (see the module docstring)."""
    mp = process_context()
    namespace = new_namespace()
    ctx.new_store(namespace)  # checked empty (and cleaned up) like every namespace of the run
    task_id = ctx.task_id("xproc")
    parent_end, child_end = mp.Pipe()
    child = mp.Process(target=with_environment(_probe_child, ignore_interrupt=True), args=(ctx.factory.spec, namespace, task_id, child_end),
                       daemon=True)
    child.start()
    child_end.close()
    try:
        _expect(parent_end, "saved")
        if _look(ctx, namespace, task_id, LOOK_SECONDS):
            return Sharing(True, "a save by a child process loads in the parent")
        parent_end.send("close")
        _expect(parent_end, "closed")
        if _look(ctx, namespace, task_id, 0.0):
            return Sharing(True, "a save by a child process loads in the parent once the child closed its store")
        parent_end.send("delete")
        with contextlib.suppress(Exception):
            _expect(parent_end, "deleted", 20)
        return Sharing(
            False,
            "a checkpoint saved by a child process (its own instance from the factory, same "
            f"namespace) was not found by the parent within {LOOK_SECONDS:g} s, nor after the "
            "child closed its store: the store keeps its data inside the process (as memory:// "
            "does), or the factory gives each process a different location",
        )
    finally:
        parent_end.close()
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(5)


def needs_cross_process(ctx: CertifyContext) -> None:
    """Raise :class:`NotCheckable` unless a child process's saves reach the parent."""
    def probe() -> Sharing | Exception:
        try:
            return probe_cross_process(ctx)
        except Exception as exc:  # remembered, so that each process contract reports it
            return exc

    sharing = ctx.memo("cross_process", probe)
    if isinstance(sharing, Exception):
        raise sharing
    if not sharing.cross_process:
        raise NotCheckable(
            f"no race or kill between processes can be observed: {sharing.how}. Certify a "
            "store whose instances in separate processes share their data (a server, a file "
            "or a directory), where the same namespace gives the same data",
            needs=CROSS_PROCESS_NEEDS,
        )
