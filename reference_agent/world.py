"""The World: the external systems tools act on, outside the agent and its crashes.

Every effect of an irreversible tool goes through :meth:`World.perform`, which records
it (tool, input, idempotency key, result) atomically with the effect itself. A World
backed by an SQLite file is shared by several processes (an agent that is SIGKILLed, the
process that resumes it, the parent that checks the outcome) and every effect is durable
before ``perform`` returns, so the record is the ground truth of what happened.

>>> world = World()
>>> world.perform("send", {"to": "ann"}, idempotency_key="k1", honour_key=True,
...               effect=lambda: "sent")
'sent'
>>> world.perform("send", {"to": "ann"}, idempotency_key="k1", honour_key=True,
...               effect=lambda: "sent again")
'sent'
>>> world.count("send", {"to": "ann"})
1

The module also holds the small offline corpus the demo's read-only tools search.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEMO_CORPUS", "Effect", "Page", "World"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    idempotency_key TEXT,
    result TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS effects_by_key ON effects (tool, idempotency_key);
"""


def _canonical(input: Mapping[str, Any]) -> str:
    # Sorted keys: two equal inputs must compare equal whatever their key order.
    return json.dumps(dict(input), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Effect:
    """One effect that happened in the World, in the order it happened (``seq``)."""

    seq: int
    tool: str
    input: dict[str, Any]
    idempotency_key: str | None
    result: str


class World:
    """A record of effects, in process (``path=None``) or in an SQLite file.

    ``perform`` is atomic across threads and processes: the key check, the effect and
    its record happen inside one write transaction, committed with ``synchronous=FULL``
    before it returns. An exception (or a crash) inside ``effect`` rolls back, so an
    effect is recorded if and only if it completed. A file that holds tables other than a
    World's (another program's, or a checkpoint store's) is refused with ``ValueError``
    and left exactly as it is.

    >>> World().effects()
    []
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = None if path is None else Path(path)
        self._lock = threading.RLock()
        target = ":memory:" if self.path is None else str(self.path)
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE below), so the
        # key check and the insert cannot interleave with another process's.
        self._conn = sqlite3.connect(
            target, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        with self._lock:
            if self.path is not None:
                # A file of another program (or the checkpoint store's own) is left exactly
                # as it is: nothing is set or created on it.
                tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                others = sorted(tables - {"effects", "sqlite_sequence"})
                if others:
                    self._conn.close()
                    raise ValueError(
                        f"{self.path} holds tables of another program ({', '.join(others[:3])}"
                        f"{', ...' if len(others) > 3 else ''}), not only a World's: give the World a "
                        "file of its own (it is created if missing); the file was left as it is"
                    )
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.executescript(_SCHEMA)

    def __repr__(self) -> str:
        return f"World({str(self.path) if self.path else 'in-process'!r})"

    def perform(
        self,
        tool: str,
        input: Mapping[str, Any],
        *,
        idempotency_key: str | None,
        honour_key: bool,
        effect: Callable[[], str],
    ) -> str:
        """Run ``effect`` once and record it, unless the key was already honoured.

        With ``honour_key`` and a key already recorded for ``tool``, return the recorded
        result and do nothing else. Otherwise call ``effect()`` and record its result.

        >>> w = World()
        >>> w.perform("create", {"n": 1}, idempotency_key="k", honour_key=False,
        ...           effect=lambda: "ok")
        'ok'
        >>> w.perform("create", {"n": 1}, idempotency_key="k", honour_key=False,
        ...           effect=lambda: "ok")
        'ok'
        >>> w.count("create", {"n": 1})
        2
        """
        encoded = _canonical(input)
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                if honour_key and idempotency_key is not None:
                    row = conn.execute(
                        "SELECT result FROM effects WHERE tool = ? AND idempotency_key = ?"
                        " ORDER BY seq LIMIT 1",
                        (tool, idempotency_key),
                    ).fetchone()
                    if row is not None:
                        conn.execute("COMMIT")
                        return str(row[0])
                result = effect()
                if not isinstance(result, str):
                    raise TypeError(f"effect of {tool!r} returned {type(result).__name__}, not str")
                conn.execute(
                    "INSERT INTO effects (tool, input, idempotency_key, result) VALUES (?, ?, ?, ?)",
                    (tool, encoded, idempotency_key, result),
                )
                conn.execute("COMMIT")
                return result
            except BaseException:
                # BaseException too: an injected crash inside the effect means it did not
                # complete, so it must leave no record.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def effects(self, tool: str | None = None) -> list[Effect]:
        """Every recorded effect (of ``tool`` only, if given), oldest first."""
        query = "SELECT seq, tool, input, idempotency_key, result FROM effects"
        params: tuple[Any, ...] = ()
        if tool is not None:
            query += " WHERE tool = ?"
            params = (tool,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY seq", params).fetchall()
        return [Effect(int(s), str(t), json.loads(i), k, str(r)) for s, t, i, k, r in rows]

    def count(self, tool: str, input: Mapping[str, Any]) -> int:
        """How many times ``tool`` took effect with exactly ``input``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT COUNT(*) FROM effects WHERE tool = ? AND input = ?",
                (tool, _canonical(input)),
            ).fetchone()
        return int(row[0])

    def clear(self) -> None:
        """Forget every effect (between runs of a test)."""
        with self._lock:
            self._conn.execute("DELETE FROM effects")

    def close(self) -> None:
        """Close the connection; the World is not used afterwards."""
        with self._lock:
            self._conn.close()


@dataclass(frozen=True)
class Page:
    """One page of the demo's offline corpus."""

    url: str
    title: str
    text: str


#: The offline corpus behind the demo's read-only ``search`` and ``fetch_page`` tools.
DEMO_CORPUS: tuple[Page, ...] = (
    Page(
        "docs://checkpointing",
        "Checkpointing long-running agents",
        "A checkpoint saves the message history, tool results, finished sub-tasks and the "
        "iteration count so that a crash at iteration 47 resumes at 47, not 0.",
    ),
    Page(
        "docs://idempotency",
        "Idempotency keys",
        "An irreversible action performed with an idempotency key can be repeated safely: "
        "the second request with the same key returns the first result and does nothing.",
    ),
    Page(
        "docs://write-ahead",
        "Write-ahead actions",
        "Record the intent durably, perform the effect with its key, record the outcome. "
        "An intent without an outcome means the outcome is unknown until it is checked.",
    ),
    Page(
        "docs://tool-results",
        "Tool results after a crash",
        "Every tool_use must be answered by exactly one tool_result in the next user "
        "message; answering 'please retry' after a crash invites a duplicate action.",
    ),
)
