"""SQLite store: the embedded default, one file, WAL mode, one transaction per save.

A checkpoint is a row of ``checkpoints`` (the head: every field but ``messages``, plus
the columns a save needs to decide and a listing needs to filter) and one row of
``messages`` per entry of the history. A save appends the new messages when the stored
history is the prefix the store last saw (same version, lineage and length) and
rewrites the history otherwise, inside the same ``BEGIN IMMEDIATE`` transaction that
checks the version: readers see the old checkpoint or the new one, never a mix.

Several threads share a store (each thread gets its own connection) and several
processes share a file (SQLite's locks plus ``busy_timeout``).

With ``ttl`` (:mod:`stores.retention`) the queries that read a head also compare its
``updated_at`` with a cutoff from this client's clock: an expired checkpoint is hidden at
once and its rows are deleted when a load or save touches it; :meth:`SQLiteStore.sweep_expired`
deletes all of them. ``updated_at`` is ISO text with microseconds always written, so that
text order is time order.

>>> import tempfile, pathlib
>>> from stores import Checkpoint
>>> path = pathlib.Path(tempfile.mkdtemp()) / "checkpoints.db"
>>> store = SQLiteStore(path)
>>> store.save(Checkpoint(task_id="t1", goal="demo")).version
1
>>> store.close()
"""

from __future__ import annotations

import datetime as _dt
import os
import shlex
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from .checkpoint import Checkpoint, CheckpointStatus, CheckpointSummary, utcnow
from .codec import (
    check_task_id,
    decode_checkpoint,
    decode_summary,
    dumps,
    encode_head,
    encode_messages,
    task_id_of,
)
from .errors import (
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from .incremental import PrefixTracker, WritePlan
from .protocol import (
    OnUnreadable,
    StoreInfo,
    check_listed_columns,
    check_listing_filters,
    metadata_matches,
    summary_or_report,
)
from .retention import EXPIRING_STATUSES, cutoff, parse_ttl
from .url import check_params, query_params, redact_url, split_url

__all__ = ["SQLiteStore"]

#: Page size of new database files (see _connect).
_PAGE_SIZE = 1024

#: Bumped when the table layout changes; stored in ``PRAGMA user_version``.
_LAYOUT_VERSION = 1

# Shaped for few 4 KiB WAL frames per save (bytes written are the cost that matters):
# messages is a rowid table, because a WITHOUT ROWID table keeps at most ~1 KiB of a row
# in its b-tree page and spills a 2 KiB message into overflow pages; and status has no
# index, because every save sets it and an index would add a frame to each commit
# (listings scan the heads table, which holds one small row per task).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    task_id       TEXT PRIMARY KEY,
    version       INTEGER NOT NULL,
    lineage       TEXT NOT NULL,
    status        TEXT NOT NULL,
    metadata      BLOB NOT NULL,
    head          BLOB NOT NULL,
    message_count INTEGER NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    task_id TEXT NOT NULL,
    idx     INTEGER NOT NULL,
    body    BLOB NOT NULL,
    UNIQUE (task_id, idx)
);
"""

_SYNCHRONOUS = ("normal", "full", "extra")
# synchronous=off leaves fsync to the OS: an OS crash or power loss can drop committed
# checkpoints and corrupt the file. Refused, not offered: no checkpoint store wants it.
_OFF = (
    "synchronous=off is refused: an OS crash or power loss can lose acknowledged saves and "
    "corrupt the file. Use normal (faster; loses only the last saves on a power loss, never "
    "on a process crash) or full (the default)"
)

#: True for a head row that has expired; its one parameter is the cutoff (ISO text). The
#: head must say the status the column says: a row whose column was edited apart from its
#: head (completed over a running checkpoint) is damage, reported by loads and listings,
#: never expired and deleted (a CLI round's running task was deleted by a read-only
#: ``status``). A head that is not JSON is never expired either: its load reports it.
_EXPIRED = (
    "(status IN ({}) AND updated_at < ? AND CASE WHEN json_valid(CAST(head AS TEXT))"
    " THEN json_extract(CAST(head AS TEXT), '$.status') END = status)"
).format(", ".join("'" + status.replace("'", "''") + "'" for status in sorted(EXPIRING_STATUSES)))
_SELECT_FOR_SAVE = "SELECT version, lineage, message_count FROM checkpoints WHERE task_id = ?"
_SELECT_FOR_SAVE_TTL = (
    f"SELECT version, lineage, message_count, {_EXPIRED} FROM checkpoints WHERE task_id = ?"
)
_APPEND_HEAD = (
    "UPDATE checkpoints SET version = ?, status = ?, metadata = ?, head = ?, message_count = ?,"
    " created_at = ?, updated_at = ?"
    " WHERE task_id = ? AND version = ? AND lineage = ? AND message_count = ?"
)
_APPEND_HEAD_TTL = _APPEND_HEAD + f" AND NOT {_EXPIRED}"
_SELECT_FOR_LOAD = "SELECT version, lineage, head, message_count FROM checkpoints WHERE task_id = ?"
_SELECT_FOR_LOAD_TTL = (
    f"SELECT version, lineage, head, message_count, {_EXPIRED} FROM checkpoints WHERE task_id = ?"
)


def _iso(moment: _dt.datetime) -> str:
    """``moment`` as ISO text that sorts as time does (microseconds always written)."""
    return moment.isoformat(timespec="microseconds")


class SQLiteStore:
    """A :class:`~stores.CheckpointStore` in one SQLite file.

    ``busy_timeout_ms`` is how long a writer waits for another process's write lock
    before the save fails with :class:`~stores.StoreUnavailableError`. ``synchronous``
    is SQLite's setting: ``full`` (the default) makes every acknowledged save survive a
    power loss; ``normal`` survives process crashes only and is faster; ``off`` is refused
    (an OS crash or power loss can corrupt the file). ``ttl`` (seconds
    or a duration such as ``"7d"``) forgets finished checkpoints that long after their
    last save (:mod:`stores.retention`).

    >>> store = SQLiteStore.from_url("sqlite:///.agentckpt/checkpoints.db")  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 10_000,
        synchronous: str = "full",
        url: str | None = None,
        ttl: float | str | None = None,
        create: bool = True,
    ) -> None:
        if isinstance(synchronous, str) and synchronous.lower() == "off":
            raise ValueError(_OFF)
        if not isinstance(synchronous, str) or synchronous.lower() not in _SYNCHRONOUS:
            raise ValueError(
                f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, not {synchronous!r}"
            )
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int) \
                or busy_timeout_ms < 0:
            raise ValueError(f"busy_timeout_ms must be an int >= 0, not {busy_timeout_ms!r}")
        #: Seconds after their last save that finished checkpoints expire (None: never).
        self.ttl = parse_ttl(ttl)
        self.path = Path(path)
        self.url = redact_url(url or f"sqlite:///{self.path}")
        #: False: open only an existing store, never create a directory, file or table.
        self.create = create
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._synchronous = synchronous.lower()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        self._tracker = PrefixTracker()
        #: Payload bytes (heads and messages) the saves of this instance wrote.
        self.bytes_written = 0
        if not create:
            if not self.path.is_file():
                raise StoreNotFoundError(
                    f"no SQLite store at {self.path}: the file does not exist (nothing was "
                    "created). Check the path in the store URL"
                )
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._unavailable(
                    f"cannot create the directory {self.path.parent}: {exc}"
                ) from None
        self._migrate()

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> SQLiteStore:
        """``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``.

        Query parameters: ``busy_timeout`` (milliseconds, default 10000),
        ``synchronous`` (``full``, the default, ``extra`` or ``normal``; ``off`` is
        refused) and ``ttl`` (seconds or a
        duration such as ``7d``; see :mod:`stores.retention`). ``create=False`` opens
        only an existing store file and creates nothing
        (:class:`~stores.StoreNotFoundError` otherwise).
        """
        parts = split_url(url)
        if parts.netloc:
            raise InvalidStoreURLError(
                f"SQLite URL {redact_url(url)!r} has a host part; use "
                "sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        path = unquote(parts.path)
        # One slash ends the (empty) host: "///rel" is relative, "////abs" absolute.
        path = path[1:] if path.startswith("/") else path
        if not path or path == ":memory:":
            raise InvalidStoreURLError(
                f"SQLite URL {redact_url(url)!r} names no file; use sqlite:///relative/path.db or "
                "sqlite:////absolute/path.db (use memory:// for an in-process store)"
            )
        if create:
            _refuse_absolute_meant(url, path)
        params = query_params(parts, url)
        check_params("SQLite", url, params, ["busy_timeout", "synchronous", "ttl"])
        try:
            busy = int(params.get("busy_timeout", "10000"))
            if busy < 0:
                raise ValueError(busy)
        except ValueError:
            raise InvalidStoreURLError(
                f"SQLite URL {redact_url(url)!r}: busy_timeout must be an integer number of milliseconds, "
                "0 or more"
            ) from None
        sync = params.get("synchronous", "full")
        if sync.lower() == "off":
            raise InvalidStoreURLError(f"SQLite URL {redact_url(url)!r}: {_OFF}")
        if sync.lower() not in _SYNCHRONOUS:
            raise InvalidStoreURLError(
                f"SQLite URL {redact_url(url)!r}: synchronous must be one of {', '.join(_SYNCHRONOUS)}"
            )
        try:
            ttl = parse_ttl(params.get("ttl"))
        except ValueError as exc:
            raise InvalidStoreURLError(f"SQLite URL {redact_url(url)!r}: {exc}") from None
        return cls(path, busy_timeout_ms=busy, synchronous=sync, url=url, ttl=ttl, create=create)

    def __repr__(self) -> str:
        return f"<SQLiteStore {self.url!r}>"

    # -- connections -------------------------------------------------------------------

    def _unavailable(self, reason: str) -> StoreUnavailableError:
        # Matched on SQLite's wording (SQLITE_NOTADB, SQLITE_CORRUPT, SQLITE_BUSY and
        # SQLITE_LOCKED): Python 3.10's exceptions carry no error code.
        keep = (
            "Do not delete or overwrite it: keep a copy of it (and of its -wal file, if any), "
            "then restore it from a backup"
        )
        if "file is not a database" in reason:
            # Another kind of file at the path, or one damaged past SQLite's header.
            return StoreUnavailableError(
                f"SQLite store {self.url!r} is unavailable: the file is not a SQLite "
                "database, or its header is damaged. Check the path in the store URL; if it "
                f"is the store's file, it is damaged. {keep}. The file was not changed"
            )
        if "database disk image is malformed" in reason:
            # A file cut short (a full disk, a copy that stopped) or partly overwritten.
            path = shlex.quote(str(self.path))
            return StoreUnavailableError(
                f"SQLite store {self.url!r} is unavailable: {reason}: the file is damaged "
                f"(cut short or partly overwritten). {keep}, or recover what it holds into a "
                f'new file (sqlite3 {path} ".recover" | sqlite3 recovered.db), check that '
                "the new file lists your tasks (the list command with --store "
                "sqlite:///recovered.db) and only then point the store URL at it: .recover "
                "may fail or find nothing in a file cut short. The file was not changed"
            )
        if "no such table" in reason:
            # PRAGMA user_version says a layout, yet the tables are not there: another
            # program's file, or what a failed recovery left.
            return StoreUnavailableError(
                f"SQLite store {self.url!r} is unavailable: {reason}: the file is a SQLite "
                "database, but not a checkpoint store (its tables are not there, though its "
                "PRAGMA user_version is set). Check the path in the store URL; if this file "
                "came out of a recovery, the recovery found nothing. The file was not changed"
            )
        for known in ("newer layout: ", "other tables: "):
            if reason.startswith(known):
                return StoreUnavailableError(
                    f"SQLite store {self.url!r} is unavailable: {reason.removeprefix(known)}"
                )
        if "is locked" in reason:
            return StoreUnavailableError(
                f"SQLite store {self.url!r} is unavailable: {reason}: another process held a "
                f"lock on it longer than busy_timeout ({self._busy_timeout_ms} ms). Try again "
                "when it is done, or raise the URL's ?busy_timeout= (milliseconds); keep the file on "
                "a local disk (a network share's locks are unreliable)"
            )
        return StoreUnavailableError(
            f"SQLite store {self.url!r} is unavailable: {reason}. Check that the path is a "
            "writable file on a local disk (not a network share) and that no other process "
            "holds a long write transaction on it"
        )

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection (raw access for tests that damage stored bytes)."""
        if self._closed:
            raise StoreUnavailableError(f"SQLite store {self.url!r} is closed")
        pid = os.getpid()
        cached: tuple[int, sqlite3.Connection] | None = getattr(self._local, "conn", None)
        # A connection must not cross fork(): a child process opens its own.
        if cached is not None and cached[0] == pid:
            return cached[1]
        try:
            # Without create, mode=rw opens an existing file and never makes one.
            target = (
                self.path if self.create else f"file:{quote(str(self.path.absolute()))}?mode=rw"
            )
            conn = sqlite3.connect(
                target,
                uri=not self.create,
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,  # only so that close() may close it from any thread
            )
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            layout = conn.execute("PRAGMA user_version").fetchone()[0]
            # Before anything is set on the file (WAL mode rewrites its header): a file of
            # another program, or of a newer layout, is left exactly as it is.
            foreign = self._foreign(conn, layout)
            if not self.create and layout == 0:
                conn.close()
                others = "" if foreign is None else f", only tables of another program ({foreign.split('(')[1].split(')')[0]})"
                raise StoreNotFoundError(
                    f"no SQLite store at {self.path}: the file holds no checkpoint tables"
                    f"{others} (nothing was created). Check the path in the store URL"
                )
            if foreign is not None:
                conn.close()
                raise self._unavailable(foreign)
            # Small pages for a new file (an existing one keeps its own): a save touches a
            # few pages, and SQLite writes whole pages to the WAL and again to the file at
            # a checkpoint, so 1 KiB pages write about a third of the bytes of 4 KiB ones.
            conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise sqlite3.OperationalError(f"cannot enable WAL mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error as exc:
            raise self._unavailable(str(exc)) from None
        self._local.conn = (pid, conn)
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    @staticmethod
    def _foreign(conn: sqlite3.Connection, layout: int) -> str | None:
        """Why the file open on ``conn`` is not a checkpoint store this code may write to
        (``None``: it is one, or a new file)."""
        if layout > _LAYOUT_VERSION:
            return (
                f"newer layout: the file has table layout {layout}, newer than this code's "
                f"{_LAYOUT_VERSION}; upgrade pytest-agentckpt to use it. The file was not changed"
            )
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if layout == 0 and tables:
            return (
                f"other tables: the file holds tables of another program ({', '.join(sorted(tables)[:3])}"
                f"{', ...' if len(tables) > 3 else ''}), not a checkpoint store. Check the path "
                "in the store URL: a checkpoint store needs a file of its own. The file was not changed"
            )
        if layout > 0 and "checkpoints" not in tables:
            return "no such table: checkpoints"
        return None

    @contextmanager
    def _transaction(self, begin: str = "BEGIN IMMEDIATE") -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            conn.execute(begin)
        except sqlite3.Error as exc:
            raise self._unavailable(str(exc)) from None
        try:
            yield conn
        except BaseException:
            _rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise self._unavailable(f"commit failed: {exc}") from None

    def _migrate(self) -> None:
        try:
            with self._transaction() as conn:
                (layout,) = conn.execute("PRAGMA user_version").fetchone()
                if layout > _LAYOUT_VERSION:
                    raise self._unavailable(
                        f"newer layout: the file has table layout {layout}, newer than this "
                        f"code's {_LAYOUT_VERSION}; upgrade pytest-agentckpt to use it. The "
                        "file was not changed"
                    )
                if layout < _LAYOUT_VERSION and self.create:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {_LAYOUT_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise self._unavailable(f"cannot set up the tables: {exc}") from None

    # -- the store protocol -------------------------------------------------------------

    def load(self, task_id: str) -> Checkpoint | None:
        check_task_id(task_id)
        limit = None if self.ttl is None else _iso(cutoff(self.ttl, utcnow()))
        try:
            # One read transaction: the head and the messages come from the same snapshot.
            with self._transaction("BEGIN") as conn:
                if limit is None:
                    row = conn.execute(_SELECT_FOR_LOAD, (task_id,)).fetchone()
                else:
                    row = conn.execute(_SELECT_FOR_LOAD_TTL, (limit, task_id)).fetchone()
                if row is None:
                    return None
                if limit is None or not row[4]:
                    rows = conn.execute(
                        "SELECT idx, body FROM messages WHERE task_id = ? ORDER BY idx",
                        (task_id,),
                    ).fetchall()
            if limit is not None and row[4]:
                # Expired: gone for the caller now. Its rows go too unless a save renewed
                # it since this snapshot (the condition is checked again); that is only
                # housekeeping, which sweep_expired or the next touch does if this fails.
                self._tracker.forget(task_id)
                with suppress(sqlite3.Error, StoreUnavailableError), self._transaction() as conn:
                    _delete_expired(conn, task_id, limit)
                return None
        except sqlite3.OperationalError as exc:
            raise self._unavailable(str(exc)) from None
        except sqlite3.DatabaseError as exc:
            # The file itself is damaged: that is corruption, never "no checkpoint".
            raise CorruptCheckpointError(task_id, f"the database file is damaged ({exc})") from None
        version, lineage, head, count = row[:4]
        if (
            not isinstance(version, int)
            or not isinstance(count, int)
            or not isinstance(lineage, str)
        ):
            raise CorruptCheckpointError(
                task_id, "stored version, lineage or message count is damaged"
            )
        if not isinstance(head, bytes | str):
            raise CorruptCheckpointError(
                task_id, f"stored head is a {type(head).__name__}, not JSON"
            )
        if [idx for idx, _ in rows] != list(range(count)):
            raise CorruptCheckpointError(
                task_id,
                f"the head records {count} messages but the stored indexes are "
                f"{_describe_indexes([idx for idx, _ in rows])}",
            )
        bodies: list[bytes] = []
        for idx, body in rows:
            if isinstance(body, str):
                body = body.encode("utf-8", "surrogatepass")
            if not isinstance(body, bytes):
                raise CorruptCheckpointError(task_id, f"stored message {idx} is not JSON bytes")
            bodies.append(body)
        copies = self._tracker.copies_for(task_id, version, lineage, count)
        checkpoint = decode_checkpoint(task_id, head, bodies, copies=copies)
        self._tracker.loaded(task_id, version, lineage, checkpoint.messages, copies=copies)
        return checkpoint.model_copy(update={"version": version})

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = check_task_id(task_id_of(checkpoint), saving=True)
        # Encode everything before touching the file: a ValueError (a lone surrogate, say)
        # must leave the store exactly as it was.
        plan = self._tracker.plan(checkpoint)
        new_version = checkpoint.version + 1
        saved = checkpoint.model_copy(update={"version": new_version, "updated_at": utcnow()})
        head = encode_head(saved)
        values = (
            saved.status,
            dumps(saved.metadata),
            head,
            _iso(saved.created_at),
            _iso(saved.updated_at),
        )
        conflict: ConflictError | None = None
        try:
            with self._transaction() as conn:
                limit = None if self.ttl is None else _iso(cutoff(self.ttl, saved.updated_at))
                # The common case first: one conditional UPDATE of the head and the new
                # rows. Anything it does not match goes the careful way below, in the
                # same transaction (the UPDATE changed nothing then).
                if plan.rewrite or not self._append(conn, checkpoint, plan, values, limit):
                    if limit is None:
                        row, expired = conn.execute(_SELECT_FOR_SAVE, (task_id,)).fetchone(), False
                    else:
                        row, expired = self._live_row(conn, task_id, limit)
                    actual = None if row is None else int(row[0])
                    if (actual or 0) == checkpoint.version:
                        plan = self._write(conn, checkpoint, plan, row, new_version, values)
                    elif expired:
                        # Commit the deletion of the expired rows, then report the conflict.
                        conflict = ConflictError(task_id, checkpoint.version, None)
                    else:
                        raise ConflictError(task_id, checkpoint.version, actual)
            if conflict is not None:
                raise conflict
        except ConflictError:
            self._tracker.forget(task_id)
            raise
        except sqlite3.DatabaseError as exc:
            self._tracker.forget(task_id)
            raise self._unavailable(
                f"save of {task_id!r} failed, nothing was written: {exc}"
            ) from None
        self.bytes_written += len(head) + sum(len(raw) for raw in plan.encoded)
        self._tracker.saved(task_id, new_version, plan, checkpoint.messages)
        return saved

    @staticmethod
    def _append(
        conn: sqlite3.Connection,
        checkpoint: Checkpoint,
        plan: WritePlan,
        values: tuple[str, bytes, bytes, str, str],
        limit: str | None,
    ) -> bool:
        """Append ``plan``'s messages if the stored head is the one the plan expects.

        The head is updated only where version, lineage and message count are what the
        tracker saw (and, with a ttl, the checkpoint has not expired); False, having
        written nothing, when it is not.
        """
        status, metadata, head, created, updated = values
        task_id = checkpoint.task_id
        args = (
            checkpoint.version + 1,
            status,
            metadata,
            head,
            plan.total,
            created,
            updated,
            task_id,
            checkpoint.version,
            plan.lineage,
            plan.start,
        )
        if limit is None:
            cursor = conn.execute(_APPEND_HEAD, args)
        else:
            cursor = conn.execute(_APPEND_HEAD_TTL, (*args, limit))
        if cursor.rowcount != 1:
            return False
        conn.executemany(
            "INSERT INTO messages (task_id, idx, body) VALUES (?, ?, ?)",
            [(task_id, plan.start + i, body) for i, body in enumerate(plan.encoded)],
        )
        return True

    @staticmethod
    def _live_row(conn: sqlite3.Connection, task_id: str, limit: str) -> tuple[Any, bool]:
        """The head row a save checks (None if expired) and whether it had expired.

        An expired checkpoint's rows are deleted here, in the save's transaction.
        """
        row = conn.execute(_SELECT_FOR_SAVE_TTL, (limit, task_id)).fetchone()
        if row is None or not row[3]:
            return row, False
        _delete_expired(conn, task_id, limit)
        return None, True

    def _write(
        self,
        conn: sqlite3.Connection,
        checkpoint: Checkpoint,
        plan: WritePlan,
        row: Any,
        new_version: int,
        values: tuple[str, bytes, bytes, str, str],
    ) -> WritePlan:
        """Write a save whose version matched ``row`` (None: a new record); the plan written."""
        task_id = checkpoint.task_id
        status, metadata, head, created, updated = values
        if row is None:
            # A record is created with a fresh lineage; stray rows cannot exist (deletes
            # remove both tables in one transaction) but cost nothing to clear.
            conn.execute("DELETE FROM messages WHERE task_id = ?", (task_id,))
            if not plan.rewrite:  # a stale tracker; a new record is always whole
                plan = WritePlan(True, 0, encode_messages(checkpoint.messages), plan.lineage)
            conn.execute(
                "INSERT INTO checkpoints (task_id, version, lineage, status, metadata,"
                " head, message_count, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    task_id,
                    new_version,
                    plan.lineage,
                    status,
                    metadata,
                    head,
                    plan.total,
                    created,
                    updated,
                ),
            )
        else:
            stored_lineage, stored_count = str(row[1]), int(row[2])
            if plan.rewrite or stored_lineage != plan.lineage or stored_count != plan.start:
                # The tracker's snapshot is not what is stored: rewrite the history.
                plan = WritePlan(
                    True,
                    0,
                    plan.encoded if plan.rewrite else encode_messages(checkpoint.messages),
                    stored_lineage,
                )
                conn.execute("DELETE FROM messages WHERE task_id = ?", (task_id,))
            conn.execute(
                "UPDATE checkpoints SET version = ?, status = ?, metadata = ?, head = ?,"
                " message_count = ?, created_at = ?, updated_at = ? WHERE task_id = ?",
                (new_version, status, metadata, head, plan.total, created, updated, task_id),
            )
        conn.executemany(
            "INSERT INTO messages (task_id, idx, body) VALUES (?, ?, ?)",
            [(task_id, plan.start + i, body) for i, body in enumerate(plan.encoded)],
        )
        return plan

    def delete(self, task_id: str) -> None:
        check_task_id(task_id)
        try:
            with self._transaction() as conn:
                conn.execute("DELETE FROM messages WHERE task_id = ?", (task_id,))
                conn.execute("DELETE FROM checkpoints WHERE task_id = ?", (task_id,))
        except sqlite3.DatabaseError as exc:
            raise self._unavailable(str(exc)) from None
        finally:
            self._tracker.forget(task_id)

    def list_checkpoints(
        self,
        *,
        status: CheckpointStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_unreadable: OnUnreadable | None = None,
    ) -> list[CheckpointSummary]:
        check_listing_filters(status, metadata, on_unreadable)
        query = "SELECT task_id, version, head FROM checkpoints"
        conditions: list[str] = []
        args: list[Any] = []
        if status is not None:
            conditions.append("status = ?")
            args.append(status)
        if self.ttl is not None:
            conditions.append(f"NOT {_EXPIRED}")
            args.append(_iso(cutoff(self.ttl, utcnow())))
        if conditions:
            query += " WHERE " + " AND ".join(conditions)
        query += " ORDER BY task_id"
        try:
            rows = self._connect().execute(query, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._unavailable(str(exc)) from None

        def summary_of(task_id: str, head: Any, version: Any) -> CheckpointSummary:
            if not isinstance(head, bytes | str):
                raise CorruptCheckpointError(task_id, "stored head is not JSON")
            summary = decode_summary(task_id, head)
            check_listed_columns(task_id, summary.status, version, status)
            return summary

        result = []
        for task_id, version, head in rows:
            summary = summary_or_report(on_unreadable, summary_of, task_id, head, version)
            # The metadata rule lives in one place (metadata_matches); SQLite filters status.
            if summary is not None and metadata_matches(summary.metadata, metadata):
                result.append(summary.model_copy(update={"version": version}))
        return result

    def info(self) -> StoreInfo:
        notes = [f"file {self.path}", "WAL mode", f"synchronous={self._synchronous}"]
        durable = self._synchronous in ("full", "extra")
        if not durable:
            notes.append("a power loss may drop the last saves (a process crash does not)")
        if self.ttl is not None:
            notes.append(f"finished checkpoints expire {self.ttl:g} s after their last save")
        return StoreInfo(
            backend="sqlite",
            url=self.url,
            durable=durable,
            incremental=True,
            notes=tuple(notes),
            ttl=self.ttl,
        )

    def sweep_expired(self) -> int:
        """Delete every expired checkpoint with its messages; how many were deleted.

        Expired checkpoints are already invisible (and deleted when a load or save touches
        them); this reclaims the space of the rest, e.g. from a periodic job. Without a
        ``ttl`` nothing expires and it returns 0.

        >>> store.sweep_expired()  # doctest: +SKIP
        3
        """
        if self.ttl is None:
            return 0
        limit = _iso(cutoff(self.ttl, utcnow()))
        try:
            with self._transaction() as conn:
                conn.execute(
                    "DELETE FROM messages WHERE task_id IN"
                    f" (SELECT task_id FROM checkpoints WHERE {_EXPIRED})",
                    (limit,),
                )
                deleted = conn.execute(f"DELETE FROM checkpoints WHERE {_EXPIRED}", (limit,))
                count = deleted.rowcount
        except sqlite3.DatabaseError as exc:
            raise self._unavailable(str(exc)) from None
        return count

    def close(self) -> None:
        self._closed = True
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            with suppress(sqlite3.Error):
                conn.close()


def _delete_expired(conn: sqlite3.Connection, task_id: str, limit: str) -> None:
    """Delete ``task_id``'s rows if it is (still) expired at the cutoff ``limit``."""
    gone = conn.execute(
        f"DELETE FROM checkpoints WHERE task_id = ? AND {_EXPIRED}", (task_id, limit)
    )
    if gone.rowcount:
        conn.execute("DELETE FROM messages WHERE task_id = ?", (task_id,))


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        # If even ROLLBACK fails the connection is unusable; the original error is the one
        # to report.
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _describe_indexes(indexes: list[int]) -> str:
    if not indexes:
        return "none"
    if len(indexes) <= 8:
        return ", ".join(str(i) for i in indexes)
    return f"{len(indexes)} rows from {indexes[0]} to {indexes[-1]}"


def _refuse_absolute_meant(url: str, path: str) -> None:
    """Refuse ``sqlite:///tmp/x.db`` when ``/tmp`` exists and ``./tmp`` does not.

    Three slashes make a path relative to the working directory; a URL written with an
    absolute path in mind would create a tree of directories there, and a run started
    elsewhere would not find the checkpoints (and start its tasks over).
    """
    relative = Path(path)
    if relative.is_absolute() or relative.parent.exists() or len(relative.parts) < 2:
        return
    first = relative.parts[0]
    if Path(first).exists() or not (Path("/") / first).is_dir():
        return
    raise InvalidStoreURLError(
        f"SQLite URL {redact_url(url)!r} names {path}, relative to the working directory "
        f"({Path.cwd()}), which has no {first}/ while /{first} exists. For the absolute path "
        f"use four slashes: sqlite:////{path}. To keep it relative, create {first}/ in the "
        "working directory first. Nothing was created"
    )
