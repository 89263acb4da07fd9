"""PostgreSQL store: psycopg 3 with a connection pool, CAS in one statement or transaction.

Tables (``<prefix>`` is ``table_prefix``, default ``agentckpt_``, in ``schema``):

- ``<prefix>checkpoints``: one row per task, the head (every field but ``messages``) as
  ``bytea``, plus ``version``, ``lineage`` and ``message_count`` for CAS and incremental
  saves, and ``status`` (text) and ``metadata`` (``jsonb``) so listings filter in SQL;
- ``<prefix>messages``: one ``bytea`` row per entry of the history. Bodies are bytes, not
  ``jsonb``: ``jsonb`` rejects ``\\u0000`` and normalises what it stores, and a stored
  history must come back byte for byte;
- ``<prefix>migrations``: the table-layout versions applied (idempotent migrations run
  on first use under an advisory lock, so several processes may start at once).

A save that only adds messages is one statement (update the head where version, lineage
and message count are what the store last saw, and insert the new rows, in one
data-modifying CTE): one round trip, one transaction. Anything else (a new task, a
changed prefix, a history this store has not seen) is a short transaction that
compare-and-sets the version and rewrites the history.

With ``ttl`` (:mod:`stores.retention`) the same statements carry one more condition,
``updated_at`` against a cutoff from this client's clock (never the server's): an expired
checkpoint is hidden at once, a load or save that touches it deletes its rows in the same
statement or transaction, and :meth:`PostgresStore.sweep_expired` deletes all of them.

psycopg is imported lazily, so ``import stores`` works without it.

>>> store = PostgresStore.from_url("postgresql://postgres@127.0.0.1:5432/test")  # doctest: +SKIP
>>> store.save(Checkpoint(task_id="t1")).version  # doctest: +SKIP
1
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import select
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlunsplit

from .checkpoint import Checkpoint, CheckpointStatus, CheckpointSummary, utcnow
from .codec import (
    check_task_id,
    decode_checkpoint,
    decode_summary,
    dumps,
    encode_head,
    encode_messages,
    split_joined,
    task_id_of,
)
from .errors import (
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
    MissingDriverError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from .incremental import PrefixTracker, WritePlan
from .protocol import (
    OnUnreadable,
    StoreInfo,
    check_listed_columns,
    check_listing_filters,
    check_version_column,
    metadata_matches,
    summary_or_report,
)
from .retention import EXPIRING_STATUSES, cutoff, parse_ttl
from .url import check_params, query_params, redact_text, redact_url, split_url, url_secrets

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresStore"]

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")

#: Query parameters this store reads; every other one goes to libpq (sslmode, ...).
_OWN_PARAMS = (
    "table_prefix",
    "schema",
    "pool_min_size",
    "pool_max_size",
    "pool_timeout",
    "ttl",
)


#: libpq's connection parameters that a URI may carry besides its keywords.
_LIBPQ_URI_EXTRAS = ("ssl",)


def _libpq_params() -> set[str]:
    """The connection parameters the installed libpq accepts (a URL may set any of them)."""
    import psycopg

    try:
        keywords = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
    except Exception:  # an exotic libpq wrapper: trust a static list of the usual ones
        keywords = {
            "host", "hostaddr", "port", "dbname", "user", "password", "passfile",
            "connect_timeout", "client_encoding", "options", "application_name",
            "fallback_application_name", "keepalives", "keepalives_idle",
            "keepalives_interval", "keepalives_count", "tcp_user_timeout", "sslmode",
            "sslcert", "sslkey", "sslpassword", "sslrootcert", "sslcrl", "sslcrldir",
            "sslsni", "requirepeer", "gssencmode", "krbsrvname", "target_session_attrs",
            "service", "channel_binding", "require_auth", "load_balance_hosts",
        }  # fmt: skip
    return keywords | set(_LIBPQ_URI_EXTRAS)


def _import_driver() -> tuple[Any, Any, Any]:
    try:
        import psycopg
        from psycopg import sql
        from psycopg_pool import ConnectionPool
    except ImportError:
        raise MissingDriverError("postgresql", "postgres", "psycopg") from None
    return psycopg, sql, ConnectionPool


def _check_identifier(kind: str, value: str) -> str:
    if not _IDENTIFIER.match(value):
        raise InvalidStoreURLError(
            f"{kind} {value!r} is not allowed: use lower-case letters, digits and underscores, "
            "starting with a letter or underscore (it becomes part of table names)"
        )
    if len(value) > 40:
        raise InvalidStoreURLError(f"{kind} {value!r} is too long (at most 40 characters)")
    return value


class PostgresStore:
    """A :class:`~stores.CheckpointStore` in PostgreSQL.

    ``conninfo`` is a libpq URL or key/value string. ``connect_timeout`` bounds how long
    an unreachable server can hold up :meth:`from_url` (and each new connection).
    ``ttl`` (seconds or a duration such as ``"7d"``) forgets finished checkpoints that
    long after their last save (:mod:`stores.retention`).

    >>> store = PostgresStore(  # doctest: +SKIP
    ...     "postgresql://app@db.internal:5432/agents", table_prefix="agentckpt_"
    ... )
    """

    def __init__(
        self,
        conninfo: str,
        *,
        table_prefix: str = "agentckpt_",
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 4,
        connect_timeout: float = 5.0,
        pool_timeout: float = 10.0,
        url: str | None = None,
        ttl: float | str | None = None,
        create: bool = True,
    ) -> None:
        #: Seconds after their last save that finished checkpoints expire (None: never).
        self.ttl = parse_ttl(ttl)
        psycopg_mod, sql_mod, pool_cls = _import_driver()
        self._psycopg = psycopg_mod
        self._sql = sql_mod
        self.url = redact_url(url or conninfo)
        self._secrets = url_secrets(url or conninfo) + url_secrets(conninfo)
        self.table_prefix = _check_identifier("table_prefix", table_prefix)
        self.schema = _check_identifier("schema", schema)
        if not 1 <= min_size <= max_size:
            raise ValueError(f"need 1 <= min_size <= max_size, got {min_size} and {max_size}")
        self._pool_timeout = pool_timeout
        self._tracker = PrefixTracker()
        #: Payload bytes (heads and messages) the saves of this instance wrote.
        self.bytes_written = 0
        self._queries = _Queries(sql_mod, schema, table_prefix)
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(connect_timeout)),
        }
        # Connect once by hand first: a pool only says "timed out", libpq says why
        # (refused, no such database, authentication failed).
        try:
            with psycopg_mod.connect(conninfo, **kwargs) as first:
                if create:
                    self._migrate(first)
                else:
                    self._check_tables(first)
        except psycopg_mod.OperationalError as exc:
            raise self._unavailable(exc) from None
        except psycopg_mod.Error as exc:
            # libpq refused the connection string itself (a bad sslmode value, say).
            reason = redact_text(" ".join(str(exc).split()), self._secrets)
            raise InvalidStoreURLError(
                f"PostgreSQL URL {self.url}: {reason}"
            ) from None
        self._pool: ConnectionPool[psycopg.Connection[Any]] = pool_cls(
            conninfo,
            kwargs=kwargs,
            min_size=min_size,
            max_size=max_size,
            open=False,
            check=_check_idle_connection,
            timeout=pool_timeout,
            name=f"agentckpt-{table_prefix}",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout + 1)
        except Exception as exc:
            self._pool.close()
            raise self._unavailable(exc) from None

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> PostgresStore:
        """``postgresql://user:password@host:5432/dbname?table_prefix=agentckpt_&schema=public``.

        Also ``pool_min_size``, ``pool_max_size``, ``pool_timeout`` (seconds to wait for a
        free connection), ``connect_timeout`` (seconds, passed to libpq too) and ``ttl``
        (seconds or a duration such as ``7d``; see :mod:`stores.retention`); any other
        libpq connection parameter (``sslmode`` ...) goes to libpq as it is; anything
        else is refused as a typo. ``create=False`` opens only existing tables and
        creates nothing (:class:`~stores.StoreNotFoundError` otherwise).
        """
        _import_driver()
        parts = split_url(url)
        scheme = parts.scheme.split("+", 1)[0]
        if scheme not in ("postgresql", "postgres"):
            raise InvalidStoreURLError(f"{redact_url(url)!r} is not a postgresql:// URL")
        params = query_params(parts, url)
        check_params(
            "PostgreSQL",
            url,
            params,
            {*_OWN_PARAMS, *_libpq_params()},
            listed=_OWN_PARAMS,
            more="and any libpq connection parameter (sslmode, connect_timeout, "
            "application_name, ...)",
        )
        own = {key: params.pop(key) for key in _OWN_PARAMS if key in params}
        try:
            min_size = int(own.get("pool_min_size", "1"))
            max_size = int(own.get("pool_max_size", str(max(4, min_size))))
            pool_timeout = float(own.get("pool_timeout", "10"))
            connect_timeout = float(params.get("connect_timeout", "5"))
        except ValueError as exc:
            raise InvalidStoreURLError(
                f"PostgreSQL URL {redact_url(url)!r}: a pool or timeout parameter is not a number "
                f"({exc})"
            ) from None
        problem = None
        if min_size < 0:
            problem = "pool_min_size must be 0 or more"
        elif max_size < max(1, min_size):
            problem = f"pool_max_size must be at least 1 and at least pool_min_size ({min_size})"
        elif not (math.isfinite(pool_timeout) and pool_timeout > 0):
            problem = "pool_timeout must be a positive number of seconds"
        elif not (math.isfinite(connect_timeout) and connect_timeout >= 0):
            problem = "connect_timeout must be a number of seconds, 0 or more"
        if problem is not None:
            raise InvalidStoreURLError(f"PostgreSQL URL {redact_url(url)!r}: {problem}")
        try:
            ttl = parse_ttl(own.get("ttl"))
        except ValueError as exc:
            raise InvalidStoreURLError(f"PostgreSQL URL {redact_url(url)!r}: {exc}") from None
        conninfo = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(params)))
        return cls(
            conninfo,
            table_prefix=own.get("table_prefix", "agentckpt_"),
            schema=own.get("schema", "public"),
            min_size=min_size,
            max_size=max_size,
            connect_timeout=connect_timeout,
            pool_timeout=pool_timeout,
            url=url,
            ttl=ttl,
            create=create,
        )

    def __repr__(self) -> str:
        return f"<PostgresStore {self.url!r} tables {self.schema}.{self.table_prefix}*>"

    # -- plumbing ----------------------------------------------------------------------

    def _unavailable(self, exc: BaseException, doing: str = "connect") -> StoreUnavailableError:
        reason = redact_text(" ".join(str(exc).split()), self._secrets) or type(exc).__name__
        return StoreUnavailableError(
            f"PostgreSQL store {self.url} is unavailable ({doing}): {reason}. Check that the "
            "server runs and accepts TCP connections at that host and port, that the user, "
            "password and database name are right (pg_hba.conf must allow this client), and "
            "that the network lets you through"
        )

    @contextmanager
    def _connection(self, doing: str) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except self._psycopg.OperationalError as exc:
            raise self._unavailable(exc, doing) from None
        except self._psycopg.Error as exc:
            # Anything else the server refuses (a constraint an operator added, a
            # permission revoked): still a store error, with the server's reason.
            raise self._unavailable(exc, doing) from None
        except Exception as exc:
            # PoolTimeout and PoolClosed come from psycopg_pool; treat them alike.
            if type(exc).__module__.startswith("psycopg_pool"):
                raise self._unavailable(exc, doing) from None
            raise

    def _connect(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (raw access for tests that damage stored bytes).

        >>> with store._connect() as conn:  # doctest: +SKIP
        ...     conn.execute("select 1")
        """
        return self._pool.connection()  # type: ignore[return-value]

    @property
    def tables(self) -> dict[str, str]:
        """The qualified names of this store's tables (for raw access and cleanup)."""
        return {
            name: f"{self.schema}.{self.table_prefix}{name}"
            for name in ("checkpoints", "messages", "migrations")
        }

    def _check_tables(self, conn: psycopg.Connection[Any]) -> None:
        """For ``create=False``: the tables must exist already (nothing is created)."""
        names = [self.tables[name] for name in ("checkpoints", "messages")]
        row = conn.execute("SELECT to_regclass(%s), to_regclass(%s)", names).fetchone()
        if row is None or None in row:
            raise StoreNotFoundError(
                f"no PostgreSQL store at {self.url}: the tables {self.schema}."
                f"{self.table_prefix}* do not exist (nothing was created). Check the "
                "database and table_prefix in the store URL"
            )
        # A newer layout is refused here too, as on a migrating open: this code would
        # misread its rows, and a delete would leave what it does not know of.
        found = conn.execute("SELECT to_regclass(%s)", (self.tables["migrations"],)).fetchone()
        if found is not None and found[0] is not None:
            layout = conn.execute(self._queries.current_layout).fetchone()
            current = int(layout[0]) if layout and layout[0] is not None else 0
            self._refuse_newer_layout(current)

    def _refuse_newer_layout(self, current: int) -> None:
        known = len(self._queries.migrations)
        if current > known:
            raise StoreUnavailableError(
                f"PostgreSQL store {self.url}: tables {self.table_prefix}* have layout "
                f"{current}, newer than this code's {known}; upgrade pytest-agentckpt"
            )

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        q = self._queries
        with conn.transaction():
            # Serialise concurrent first uses of the same tables.
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                (f"agentckpt:{self.schema}.{self.table_prefix}",),
            )
            if self.schema != "public":
                conn.execute(self._sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(q.schema))
            conn.execute(q.create_migrations)
            row = conn.execute(q.current_layout).fetchone()
            current = int(row[0]) if row and row[0] is not None else 0
            self._refuse_newer_layout(current)
            for number, statements in enumerate(q.migrations, start=1):
                if number <= current:
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute(q.record_layout, (number,))

    # -- the store protocol ------------------------------------------------------------

    def load(self, task_id: str) -> Checkpoint | None:
        check_task_id(task_id)
        if "\x00" in task_id:
            return None  # PostgreSQL text cannot hold NUL, so no such task can exist
        q = self._queries
        with self._connection("load") as conn:
            # One statement, one snapshot: the head and the messages always match.
            cur = conn.cursor(binary=True)
            if self.ttl is None:
                row = cur.execute(q.load_joined, (task_id,), prepare=True).fetchone()
            else:
                # Also deletes the task's rows if it has expired (then no row comes back).
                limit = cutoff(self.ttl, utcnow())
                row = cur.execute(
                    q.load_joined_live, (task_id, limit, task_id, limit), prepare=True
                ).fetchone()
            bodies = None if row is None else _split_joined(row)
            if row is not None and bodies is None:
                # Not the rows of a sound history (or an aggregate gave them out of
                # order): read them one by one, to load them or to name the damage.
                if self.ttl is None:
                    row = cur.execute(q.load, (task_id,)).fetchone()
                else:
                    row = cur.execute(q.load_live, (task_id, limit, task_id, limit)).fetchone()
        if row is None:
            return None
        version, lineage, head, count, indexes, raw_bodies = row[:6]
        check_version_column(task_id, version)
        if bodies is None:
            indexes = list(indexes or [])
            if indexes != list(range(count)):
                shown = indexes if len(indexes) <= 8 else f"{len(indexes)} rows"
                raise CorruptCheckpointError(
                    task_id, f"the head records {count} messages but the stored indexes are {shown}"
                )
            if head is None or any(b is None for b in raw_bodies):
                raise CorruptCheckpointError(task_id, "a stored head or message is NULL")
            bodies = [bytes(b) for b in raw_bodies]
        copies = self._tracker.copies_for(task_id, int(version), str(lineage), len(bodies))
        checkpoint = decode_checkpoint(task_id, bytes(head), bodies, copies=copies)
        self._tracker.loaded(
            task_id, int(version), str(lineage), checkpoint.messages, copies=copies
        )
        return checkpoint.model_copy(update={"version": int(version)})

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = check_task_id(task_id_of(checkpoint), saving=True)
        # Encode before any I/O: a ValueError leaves the store untouched.
        plan = self._tracker.plan(checkpoint)
        new_version = checkpoint.version + 1
        saved = checkpoint.model_copy(update={"version": new_version, "updated_at": utcnow()})
        head = encode_head(saved)
        metadata = _jsonb_or_none(saved.metadata)
        row = (saved.status, metadata, head, saved.created_at, saved.updated_at)
        q = self._queries
        # With a ttl, the saves' conditions exclude what expired at this save's clock.
        limit = None if self.ttl is None else cutoff(self.ttl, saved.updated_at)
        try:
            with self._connection("save") as conn:
                if checkpoint.version > 0 and not plan.rewrite:
                    where = (task_id, checkpoint.version, plan.lineage, plan.start)
                    cur = conn.execute(
                        q.append if limit is None else q.append_live,
                        (
                            new_version,
                            *row,
                            plan.total,
                            *(where if limit is None else (*where, limit)),
                            task_id,
                            list(range(plan.start, plan.total)),
                            plan.encoded,
                        ),
                        prepare=True,
                    )
                    appended = cur.fetchone()
                    if appended is not None and appended[0] == 1:
                        self.bytes_written += len(head) + sum(len(raw) for raw in plan.encoded)
                        self._tracker.saved(task_id, new_version, plan, checkpoint.messages)
                        return saved
                    # The stored history is not the one this store knows: rewrite below,
                    # where the version is checked again.
                plan = self._rewrite(conn, checkpoint, plan, new_version, row, limit)
        except BaseException:
            self._tracker.forget(task_id)
            raise
        self.bytes_written += len(head) + sum(len(raw) for raw in plan.encoded)
        self._tracker.saved(task_id, new_version, plan, checkpoint.messages)
        return saved

    def _rewrite(
        self,
        conn: psycopg.Connection[Any],
        checkpoint: Checkpoint,
        plan: WritePlan,
        new_version: int,
        row: tuple[Any, ...],
        limit: _dt.datetime | None,
    ) -> WritePlan:
        task_id = checkpoint.task_id
        q = self._queries
        encoded = plan.encoded if plan.rewrite else encode_messages(checkpoint.messages)
        with conn.transaction():
            if checkpoint.version == 0:
                # With a ttl, an expired checkpoint is replaced as if it were absent.
                values = (task_id, new_version, plan.lineage, *row, len(encoded))
                claimed = conn.execute(
                    q.create if limit is None else q.create_or_revive,
                    values if limit is None else (*values, limit),
                ).fetchone()
            else:
                values = (new_version, *row, len(encoded), task_id, checkpoint.version)
                claimed = conn.execute(
                    q.update_head if limit is None else q.update_head_live,
                    values if limit is None else (*values, limit),
                ).fetchone()
            if claimed is None:
                # A conflict, raised once the transaction ends: it wrote nothing, unless the
                # version query (with a ttl) deleted an expired checkpoint, which must stay
                # deleted.
                actual = self._stored_version(conn, task_id, limit)
            else:
                conn.execute(q.delete_messages, (task_id,))
                if encoded:
                    conn.execute(q.insert_messages, (task_id, list(range(len(encoded))), encoded))
        if claimed is None:
            raise ConflictError(task_id, checkpoint.version, actual)
        # The stored lineage: a new record's is plan.lineage, given back by RETURNING.
        return WritePlan(True, 0, encoded, str(claimed[0]))

    def _stored_version(
        self, conn: psycopg.Connection[Any], task_id: str, limit: _dt.datetime | None
    ) -> int | None:
        """The stored version (for a conflict); with a ttl, also deletes an expired task."""
        q = self._queries
        if limit is None:
            found = conn.execute(q.version, (task_id,)).fetchone()
        else:
            found = conn.execute(q.live_version, (task_id, limit, task_id, limit)).fetchone()
        return None if found is None else int(found[0])

    def delete(self, task_id: str) -> None:
        check_task_id(task_id)
        if "\x00" in task_id:
            return
        try:
            with self._connection("delete") as conn:
                conn.execute(self._queries.delete, (task_id, task_id))
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
        sql_mod = self._sql
        conditions: list[Any] = []
        args: list[Any] = []
        if status is not None:
            conditions.append(sql_mod.SQL("status = %s"))
            args.append(status)
        if self.ttl is not None:
            conditions.append(self._queries.not_expired)
            args.append(cutoff(self.ttl, utcnow()))
        wanted = _jsonb_or_none(dict(metadata)) if metadata else None
        if wanted is not None:
            # @> is containment, wider than the equality rule: it narrows the rows in
            # SQL (using the GIN index) and metadata_matches decides. Rows whose metadata
            # jsonb cannot hold (NUL) are stored as NULL and always checked in Python.
            conditions.append(sql_mod.SQL("(metadata @> %s::jsonb OR metadata IS NULL)"))
            args.append(wanted)
        query = self._queries.list_base
        if conditions:
            query = sql_mod.SQL("{} WHERE {}").format(query, sql_mod.SQL(" AND ").join(conditions))
        query = sql_mod.SQL('{} ORDER BY task_id COLLATE "C"').format(query)
        with self._connection("list") as conn:
            rows = conn.cursor(binary=True).execute(query, args).fetchall()

        def summary_of(task_id: str, head: Any, version: Any) -> CheckpointSummary:
            if head is None:
                raise CorruptCheckpointError(task_id, "stored head is NULL")
            summary = decode_summary(task_id, bytes(head))
            check_listed_columns(task_id, summary.status, version, status)
            return summary

        result = []
        for task_id, version, head in rows:
            summary = summary_or_report(on_unreadable, summary_of, task_id, head, version)
            if summary is not None and metadata_matches(summary.metadata, metadata):
                result.append(summary.model_copy(update={"version": int(version)}))
        return result

    def info(self) -> StoreInfo:
        notes = [f"tables {self.schema}.{self.table_prefix}*"]
        if self.ttl is not None:
            notes.append(f"finished checkpoints expire {self.ttl:g} s after their last save")
        return StoreInfo(
            backend="postgresql",
            url=self.url,
            durable=True,
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
        with self._connection("sweep expired") as conn:
            row = conn.execute(self._queries.sweep, (cutoff(self.ttl, utcnow()),)).fetchone()
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        self._pool.close()

    def drop_tables(self) -> None:
        """Drop this store's tables (test cleanup, uninstall). The store is unusable after.

        >>> store.drop_tables()  # doctest: +SKIP
        """
        with self._connection("drop tables") as conn, conn.transaction():
            for name in ("messages", "checkpoints", "migrations"):
                conn.execute(
                    self._sql.SQL("DROP TABLE IF EXISTS {}").format(
                        self._sql.Identifier(self.schema, self.table_prefix + name)
                    )
                )
        self._tracker = PrefixTracker()


def _split_joined(row: tuple[Any, ...]) -> list[bytes | str] | None:
    """The message bodies of a ``load_joined`` row, or None if they need a careful read.

    Only a history whose indexes are exactly 0..n-1 (n the head's count) in some order,
    with no NULL and lengths that add up, is split here, and put in index order.
    """
    _, _, head, count, indexes, lengths, joined = row
    if head is None or not isinstance(count, int):
        return None
    if count == 0:
        return [] if indexes is None else None
    if indexes is None or lengths is None or joined is None:
        return None
    indexes = list(indexes)
    if len(indexes) != count or None in lengths or None in indexes:
        return None
    data = bytes(joined)
    if sum(lengths) != len(data):
        return None
    entries = split_joined(data, lengths)
    if indexes == list(range(count)):
        return entries
    if sorted(indexes) != list(range(count)):
        return None
    ordered: list[bytes | str] = [b""] * count
    for index, entry in zip(indexes, entries, strict=True):
        ordered[index] = entry
    return ordered


def _jsonb_or_none(value: Mapping[str, Any]) -> str | None:
    """``value`` as JSON text for a jsonb parameter, or None when jsonb cannot hold it."""
    text = dumps(value).decode("utf-8")
    # jsonb refuses \u0000 anywhere; such metadata lives only in the head.
    return None if "\\u0000" in text or "\x00" in text else text


def _check_idle_connection(conn: psycopg.Connection[Any]) -> None:
    """Pool check on checkout, without a round trip.

    An idle connection has nothing to read. If its socket is readable, the server closed
    it (restart, idle timeout, admin kill) or sent a FATAL message: discard it rather than
    fail the caller's next statement.
    """
    if conn.closed or conn.broken:
        raise _lost()
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        # Close it: the pool takes back a failed connection and replaces it only when
        # it is closed; an open one would be handed out again.
        conn.close()
        raise _lost()


def _lost() -> Exception:
    import psycopg

    return psycopg.OperationalError("pooled connection was closed by the server")


# A task's messages as one value: indexes, lengths and the concatenated bodies, in the
# order the rows are read (no sort: an ORDER BY of megabytes of bodies spills to disk).
# The aggregates of one query all see the rows in the same order, so the indexes say
# where each body goes.
_JOINED = (
    "SELECT array_agg(m.idx) AS idxs, array_agg(octet_length(m.body)) AS lens,"
    " string_agg(m.body, ''::bytea) AS bodies"
    " FROM {msg} m WHERE m.task_id = c.task_id"
)


class _Queries:
    """Every statement, composed once with safely quoted identifiers."""

    def __init__(self, sql_mod: Any, schema: str, prefix: str) -> None:
        S = sql_mod.SQL
        self.schema = sql_mod.Identifier(schema)
        cp = sql_mod.Identifier(schema, prefix + "checkpoints")
        msg = sql_mod.Identifier(schema, prefix + "messages")
        mig = sql_mod.Identifier(schema, prefix + "migrations")
        names = {"cp": cp, "msg": msg, "mig": mig}

        def q(text: str, **extra: Any) -> sql.Composed:
            composed: sql.Composed = S(text).format(**names, **extra)
            return composed

        self.create_migrations = q(
            "CREATE TABLE IF NOT EXISTS {mig} ("
            " version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        self.current_layout = q("SELECT max(version) FROM {mig}")
        self.record_layout = q("INSERT INTO {mig} (version) VALUES (%s) ON CONFLICT DO NOTHING")
        self.migrations: list[list[sql.Composed]] = [
            [
                q(
                    "CREATE TABLE IF NOT EXISTS {cp} ("
                    " task_id text PRIMARY KEY,"
                    " version bigint NOT NULL,"
                    " lineage text NOT NULL,"
                    " status text NOT NULL,"
                    " metadata jsonb,"
                    " head bytea NOT NULL,"
                    " message_count integer NOT NULL,"
                    " created_at timestamptz NOT NULL,"
                    " updated_at timestamptz NOT NULL)"
                ),
                q(
                    "CREATE TABLE IF NOT EXISTS {msg} ("
                    " task_id text NOT NULL,"
                    " idx integer NOT NULL,"
                    " body bytea NOT NULL,"
                    " PRIMARY KEY (task_id, idx))"
                ),
                q(
                    "CREATE INDEX IF NOT EXISTS {name} ON {cp} (status)",
                    name=sql_mod.Identifier(prefix + "checkpoints_status"),
                ),
                q(
                    "CREATE INDEX IF NOT EXISTS {name} ON {cp} USING gin (metadata jsonb_path_ops)",
                    name=sql_mod.Identifier(prefix + "checkpoints_metadata"),
                ),
            ],
            [
                # Keep message rows up to ~8 KB inline: a 2 KB tool result would otherwise
                # go to the TOAST table, one more row and index entry per message.
                q("ALTER TABLE {msg} SET (toast_tuple_target = 8160)"),
            ],
        ]
        head_columns = (
            "status = %s, metadata = %s::jsonb, head = %s, created_at = %s, updated_at = %s"
        )
        # The incremental save: one statement. The insert reads from the update's
        # RETURNING, so the rows go in only when version, lineage and count matched.
        self.append = q(
            "WITH updated AS ("
            " UPDATE {cp} SET version = %s, " + head_columns + ", message_count = %s"
            " WHERE task_id = %s AND version = %s AND lineage = %s AND message_count = %s"
            " RETURNING task_id),"
            " inserted AS ("
            " INSERT INTO {msg} (task_id, idx, body)"
            " SELECT %s, m.idx, m.body FROM updated,"
            " unnest(%s::integer[], %s::bytea[]) AS m(idx, body))"
            " SELECT count(*) FROM updated"
        )
        self.create = q(
            "INSERT INTO {cp} (task_id, version, lineage, status, metadata, head,"
            " created_at, updated_at, message_count)"
            " VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s)"
            " ON CONFLICT (task_id) DO NOTHING RETURNING lineage"
        )
        self.update_head = q(
            "UPDATE {cp} SET version = %s, " + head_columns + ", message_count = %s"
            " WHERE task_id = %s AND version = %s RETURNING lineage"
        )
        self.version = q("SELECT version FROM {cp} WHERE task_id = %s")
        self.delete_messages = q("DELETE FROM {msg} WHERE task_id = %s")
        self.insert_messages = q(
            "INSERT INTO {msg} (task_id, idx, body)"
            " SELECT %s, m.idx, m.body FROM unnest(%s::integer[], %s::bytea[]) AS m(idx, body)"
        )
        self.delete = q(
            "WITH gone AS (DELETE FROM {cp} WHERE task_id = %s)"
            " DELETE FROM {msg} WHERE task_id = %s"
        )
        self.load = q(
            "SELECT c.version, c.lineage, c.head, c.message_count,"
            " ARRAY(SELECT m.idx FROM {msg} m WHERE m.task_id = c.task_id ORDER BY m.idx),"
            " ARRAY(SELECT m.body FROM {msg} m WHERE m.task_id = c.task_id ORDER BY m.idx)"
            " FROM {cp} c WHERE c.task_id = %s"
        )
        # The same in one value: the bodies concatenated (one bytea, not an array of
        # thousands), with their indexes and lengths. The load checks that the indexes
        # are 0..n-1 in some order, else reads again with the query above.
        self.load_joined = q(
            "SELECT c.version, c.lineage, c.head, c.message_count, m.idxs, m.lens, m.bodies"
            " FROM {cp} c LEFT JOIN LATERAL (" + _JOINED + ") m ON true"
            " WHERE c.task_id = %s"
        )
        self.list_base = q("SELECT task_id, version, head FROM {cp}")
        self._retention(sql_mod, q, head_columns)

    def _retention(self, sql_mod: Any, q: Callable[..., sql.Composed], head_columns: str) -> None:
        """The statements of a store with a ttl: the ones above, minus what expired.

        Each takes the cutoff (``updated_at`` before which a finished checkpoint has
        expired) as a parameter: the client's clock, as for ``updated_at`` itself.
        """
        statuses = sql_mod.SQL(", ").join(sql_mod.Literal(s) for s in sorted(EXPIRING_STATUSES))
        # Never a row whose stored head says running anywhere: a status column edited apart
        # from its head (completed over a running task) is damage, which loads and listings
        # report, not an expired task to delete (a CLI round's running task was deleted by a
        # read-only `status`). The bytes are searched, not parsed: a damaged head cannot make
        # the query fail, and a finished head holding that text in its metadata is merely
        # kept past its ttl.
        running = sql_mod.Literal(b'"status":"running"')
        expired = sql_mod.SQL("(status IN ({}) AND updated_at < %s AND position({} in head) = 0)").format(
            statuses, running
        )
        expired_c = sql_mod.SQL("(c.status IN ({}) AND c.updated_at < %s AND position({} in c.head) = 0)").format(
            statuses, running
        )
        #: A listing condition: the row has not expired.
        self.not_expired: sql.Composed = sql_mod.SQL("NOT {}").format(expired)
        # Deletes the task's rows if it expired, in the statement that reads it.
        drop_task = (
            "WITH gone AS (DELETE FROM {cp} WHERE task_id = %s AND {expired} RETURNING task_id),"
            " gone_messages AS (DELETE FROM {msg} WHERE task_id IN (SELECT task_id FROM gone))"
        )
        self.append_live = q(
            "WITH updated AS ("
            " UPDATE {cp} SET version = %s, " + head_columns + ", message_count = %s"
            " WHERE task_id = %s AND version = %s AND lineage = %s AND message_count = %s"
            " AND NOT {expired}"
            " RETURNING task_id),"
            " inserted AS ("
            " INSERT INTO {msg} (task_id, idx, body)"
            " SELECT %s, m.idx, m.body FROM updated,"
            " unnest(%s::integer[], %s::bytea[]) AS m(idx, body))"
            " SELECT count(*) FROM updated",
            expired=expired,
        )
        self.create_or_revive = q(
            "INSERT INTO {cp} AS c (task_id, version, lineage, status, metadata, head,"
            " created_at, updated_at, message_count)"
            " VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s)"
            " ON CONFLICT (task_id) DO UPDATE SET version = EXCLUDED.version,"
            " lineage = EXCLUDED.lineage, status = EXCLUDED.status,"
            " metadata = EXCLUDED.metadata, head = EXCLUDED.head,"
            " created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,"
            " message_count = EXCLUDED.message_count"
            " WHERE {expired_c} RETURNING c.lineage",
            expired_c=expired_c,
        )
        self.update_head_live = q(
            "UPDATE {cp} SET version = %s, " + head_columns + ", message_count = %s"
            " WHERE task_id = %s AND version = %s AND NOT {expired} RETURNING lineage",
            expired=expired,
        )
        self.live_version = q(
            drop_task + " SELECT version FROM {cp} WHERE task_id = %s AND NOT {expired}",
            expired=expired,
        )
        self.load_live = q(
            drop_task + " SELECT c.version, c.lineage, c.head, c.message_count,"
            " ARRAY(SELECT m.idx FROM {msg} m WHERE m.task_id = c.task_id ORDER BY m.idx),"
            " ARRAY(SELECT m.body FROM {msg} m WHERE m.task_id = c.task_id ORDER BY m.idx)"
            " FROM {cp} c WHERE c.task_id = %s AND NOT {expired_c}",
            expired=expired,
            expired_c=expired_c,
        )
        self.load_joined_live = q(
            drop_task + " SELECT c.version, c.lineage, c.head, c.message_count,"
            " m.idxs, m.lens, m.bodies"
            " FROM {cp} c LEFT JOIN LATERAL (" + _JOINED + ") m ON true"
            " WHERE c.task_id = %s AND NOT {expired_c}",
            expired=expired,
            expired_c=expired_c,
        )
        self.sweep = q(
            "WITH gone AS (DELETE FROM {cp} WHERE {expired} RETURNING task_id),"
            " gone_messages AS (DELETE FROM {msg} WHERE task_id IN (SELECT task_id FROM gone))"
            " SELECT count(*) FROM gone",
            expired=expired,
        )
