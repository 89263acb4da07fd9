"""Redis checkpoint store: compare-and-set and the write in one server-side Lua script.

Layout under ``key_prefix`` (default ``agentckpt:``), per task:

- ``{prefix}task:{task_id}:head`` — a hash: ``version``, ``lineage``, ``count`` (messages
  stored) and ``body`` (the JSON head: every checkpoint field but ``messages``);
- ``{prefix}task:{task_id}:msgs`` — a list, one JSON message per element;
- ``{prefix}index`` — a set of every stored task id, for listing.

A save runs one script: it checks the stored version (and, for an append, the lineage
and the list length), then appends the new suffix (or replaces the whole list) and sets
the head. Redis runs a script atomically, so a reader sees the old checkpoint or the new
one, never a mix. The script does not span slots of a Redis Cluster: use a single
primary (or a primary with replicas).

Retention (``ttl``, see :mod:`stores.retention`) uses Redis key expiry: the script that
writes a completed or failed checkpoint gives its head and messages one expiry time
(``PEXPIREAT``), and one that writes a running checkpoint clears it (``PERSIST``), so a
running task never expires. A store without ``ttl`` clears it on every save too: what
it writes is kept until deleted. The index set never expires; a listing skips the tasks
whose head has expired and removes their entries. Open every store of a key prefix with
the same ``ttl``: a store without one reports an expired task's leftover index entry as
damage when it loads that task.

Redis keeps data in memory; only AOF persistence (``appendonly yes``) makes an
acknowledged save survive a restart. :meth:`RedisStore.info` says whether it is on, and
the store warns (:class:`RedisNotDurableWarning`) when it is off.
"""

from __future__ import annotations

import math
import unicodedata
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlencode, urlunsplit

from .checkpoint import Checkpoint, CheckpointStatus, CheckpointSummary, utcnow
from .codec import (
    check_task_id,
    decode_checkpoint,
    decode_summary,
    encode_head,
    encode_messages,
    task_id_of,
)
from .errors import (
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
    MissingDriverError,
    StoreUnavailableError,
)
from .incremental import PrefixTracker, WritePlan
from .protocol import (
    OnUnreadable,
    StoreInfo,
    check_listing_filters,
    summary_matches,
    summary_or_report,
)
from .retention import EXPIRING_STATUSES, parse_ttl
from .url import check_params, query_params, redact_text, redact_url, split_url, url_secrets

if TYPE_CHECKING:
    import redis as redis_module

__all__ = ["DEFAULT_KEY_PREFIX", "RedisNotDurableWarning", "RedisStore"]

DEFAULT_KEY_PREFIX = "agentckpt:"

# Seconds: a dead or unreachable server must fail a save quickly, not hang an agent.
_CONNECT_TIMEOUT = 3.0
_SOCKET_TIMEOUT = 10.0
# Messages pushed per RPUSH inside the script (Lua's unpack has a stack limit).
_PUSH_BATCH = 500

_OK, _CONFLICT, _STALE_PREFIX, _BAD_VERSION = 1, 0, 2, 3

# Longest ttl Redis can take as a key expiry here (about 31,000 years), in milliseconds.
_MAX_TTL_MS = 10**15

# KEYS: head hash, messages list, index set.
# ARGV: expected version, mode ("a" append / "r" rewrite), lineage, start, task id,
#       head body, new version, [expiry in ms (ttl stores only)], messages...
# Returns {status, stored version (-1 when absent)}.
_SAVE_TEMPLATE = """
local stored = redis.call('HGET', KEYS[1], 'version')
local actual = 0
if stored then
  actual = tonumber(stored)
  if actual == nil then return {3, -1} end
end
if actual ~= tonumber(ARGV[1]) then
  if stored then return {0, actual} end
  return {0, -1}
end
if ARGV[2] == 'a' then
  if redis.call('HGET', KEYS[1], 'lineage') ~= ARGV[3]
     or redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[4]) then
    return {2, actual}
  end
else
  redis.call('DEL', KEYS[2])
end
local n = #ARGV
local i = @FIRST@
while i <= n do
  local j = math.min(i + 499, n)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
redis.call('HSET', KEYS[1], 'version', ARGV[7], 'lineage', ARGV[3],
           'count', redis.call('LLEN', KEYS[2]), 'body', ARGV[6])
redis.call('SADD', KEYS[3], ARGV[5])
@EXPIRY@
return {1, tonumber(ARGV[7])}
"""

# Without ttl: whatever this store writes is kept (an expiry a ttl store set is cleared).
_KEEP = """redis.call('PERSIST', KEYS[1])
redis.call('PERSIST', KEYS[2])"""

# With ttl: ARGV[8] > 0 (a finished checkpoint) sets one absolute expiry time on the head
# and the messages, so that they can never expire one without the other; 0 (a running
# one) clears it, as a checkpoint saved back to running must never expire.
_EXPIRE = """local ms = tonumber(ARGV[8])
if ms > 0 then
  local now = redis.call('TIME')
  local at = string.format('%d', now[1] * 1000 + math.floor(now[2] / 1000) + ms)
  redis.call('PEXPIREAT', KEYS[1], at)
  redis.call('PEXPIREAT', KEYS[2], at)
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
end"""

_SAVE_SCRIPT = _SAVE_TEMPLATE.replace("@FIRST@", "8").replace("@EXPIRY@", _KEEP)
_SAVE_TTL_SCRIPT = _SAVE_TEMPLATE.replace("@FIRST@", "9").replace("@EXPIRY@", _EXPIRE)

# KEYS: index set, then the head and the messages of each task in ARGV.
# Removes the index entry of each task none of whose keys exists (it expired), atomically
# with the check, so that a task created again meanwhile keeps its entry.
# Returns the number of entries removed.
_PRUNE_SCRIPT = """
local removed = 0
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[2 * i], KEYS[2 * i + 1]) == 0 then
    removed = removed + redis.call('SREM', KEYS[1], ARGV[i])
  end
end
return removed
"""


#: Query parameters this store reads; the driver's own (see _driver_params) go to redis-py.
_OWN_PARAMS = ("key_prefix", "ttl")
# Connection settings redis-py takes as text from a URL (besides its typed ones).
_DRIVER_TEXT_PARAMS = (
    "username", "password", "client_name", "lib_name", "lib_version", "encoding",
    "encoding_errors", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_path", "ssl_ca_data",
    "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_ciphers",
)  # fmt: skip


def _driver_params() -> set[str]:
    """The query parameters redis-py reads from a URL."""
    from redis.connection import URL_QUERY_ARGUMENT_PARSERS

    return set(URL_QUERY_ARGUMENT_PARSERS) | set(_DRIVER_TEXT_PARAMS)


def _database_index(url: str, path: str, params: Mapping[str, str]) -> int:
    """The database a URL names (``/0`` or ``?db=0``); anything but a number is refused.

    redis-py reads ``/abc`` as database 0, silently: a typo would share another
    application's data.
    """
    raw = params.get("db")
    where = "?db="
    if raw is None:
        raw, where = unquote(path).strip("/"), "path /"
        if not raw:
            return 0
    if not raw.isascii() or not raw.isdigit():
        raise InvalidStoreURLError(
            f"Redis URL {redact_url(url)!r}: the database ({where}{raw}) must be a number "
            "such as 0 (redis://host:6379/0)"
        )
    return int(raw)


def _check_key_prefix(prefix: object) -> str:
    """``prefix`` if keys may live under it, else a TypeError/ValueError saying what to give."""
    if not isinstance(prefix, str):
        raise TypeError(f"key_prefix must be a string such as 'myapp:', not {prefix!r}")
    if not prefix:
        raise ValueError(
            "key_prefix is empty: give a prefix such as 'myapp:' (or leave it out for "
            f"{DEFAULT_KEY_PREFIX!r}); keys without one would mix with other applications' keys"
        )
    bad = next((c for c in prefix if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise ValueError(
            f"key_prefix {prefix!r} holds the control character {bad!r}: use letters, "
            "digits and punctuation such as 'myapp:'"
        )
    return prefix


def _check_ttl(value: float | str | None) -> float | None:
    """``stores.retention.parse_ttl``, and short enough for a Redis key expiry."""
    ttl = parse_ttl(value)
    if ttl is not None and math.ceil(ttl * 1000) > _MAX_TTL_MS:
        raise ValueError(
            f"ttl {value!r} is longer than Redis can expire keys after; leave it out to keep "
            "checkpoints"
        )
    return ttl


class RedisNotDurableWarning(UserWarning):
    """The Redis server has AOF persistence off: every checkpoint is lost on restart."""


def _import_redis() -> Any:
    try:
        import redis
    except ImportError:
        raise MissingDriverError("redis", "redis", "redis") from None
    return redis


class RedisStore:
    """A :class:`~stores.CheckpointStore` on Redis (redis-py), with incremental saves.

    >>> store = RedisStore.from_url("redis://127.0.0.1:6379/0?key_prefix=myapp:")  # doctest: +SKIP
    >>> store.info().durable  # doctest: +SKIP
    True

    ``client`` must be a ``redis.Redis`` with ``decode_responses=False``. Keys live under
    ``key_prefix``, so several applications (or test runs) can share one server. ``ttl``
    (seconds or a duration such as ``"7d"``) makes completed and failed checkpoints expire
    that long after their last save (:mod:`stores.retention`); running ones never do.
    """

    def __init__(
        self,
        client: redis_module.Redis,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        url: str = "redis://",
        warn_if_not_durable: bool = True,
        ttl: float | str | None = None,
        database: int | None = None,
    ) -> None:
        #: Seconds after its last save that a finished checkpoint expires (None: never).
        self.ttl = _check_ttl(ttl)
        self._ttl_ms = None if self.ttl is None else math.ceil(self.ttl * 1000)
        self._redis = _import_redis()
        if not callable(getattr(client, "register_script", None)):
            raise TypeError(
                f"client must be a redis.Redis client, not {type(client).__name__}; for a URL "
                "use RedisStore.from_url(url) or stores.open_store(url)"
            )
        self._client = client
        self.key_prefix = _check_key_prefix(key_prefix)
        self.url = redact_url(url)
        self._secrets = url_secrets(url)
        self._tracker = PrefixTracker()
        #: Payload bytes (heads and messages) the saves of this instance sent to Redis.
        self.bytes_written = 0
        self._script = client.register_script(
            _SAVE_SCRIPT if self.ttl is None else _SAVE_TTL_SCRIPT
        )
        self._prune_script = client.register_script(_PRUNE_SCRIPT)
        self._durability: tuple[bool | None, tuple[str, ...]] | None = None
        self._database = database
        if warn_if_not_durable:
            durable, _ = self._probe_durability()
            if durable is False:
                warnings.warn(
                    f"Redis at {self.url} has AOF persistence off (appendonly no): every "
                    "checkpoint is lost when the server restarts. Set 'appendonly yes' "
                    "(and 'appendfsync always' or 'everysec') in redis.conf",
                    RedisNotDurableWarning,
                    stacklevel=3,
                )

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> RedisStore:
        """``redis://[:password@]host:6379/0?key_prefix=agentckpt:&ttl=7d`` (``rediss://`` for TLS).

        ``ttl`` is optional (see :mod:`stores.retention`). Other query parameters go to
        redis-py. Connects at once, so a wrong URL or a server that is down fails here
        with :class:`~stores.StoreUnavailableError`. An unknown parameter (a typo such as
        ``kye_prefix``) and a database that is not a number, or that the server does not
        have, are refused with :class:`~stores.InvalidStoreURLError`. ``create`` changes
        nothing: opening a Redis store writes nothing.
        """
        redis = _import_redis()
        parts = split_url(url)
        params = query_params(parts, url)
        check_params(
            "Redis", url, params, {*_OWN_PARAMS, *_driver_params()},
            listed=_OWN_PARAMS, more="and redis-py's connection parameters "
            "(socket_timeout, client_name, ssl_cert_reqs, ...)",
        )  # fmt: skip
        database = _database_index(url, parts.path, params)
        try:
            key_prefix = _check_key_prefix(params.pop("key_prefix", DEFAULT_KEY_PREFIX))
        except ValueError as exc:
            raise InvalidStoreURLError(f"Redis URL {redact_url(url)!r}: {exc}") from None
        try:
            ttl = _check_ttl(params.pop("ttl", None))
        except ValueError as exc:
            raise InvalidStoreURLError(f"{redact_url(url)!r}: {exc}") from None
        for name, value in params.items():
            if name.endswith("timeout"):
                try:
                    seconds = float(value)
                except ValueError:
                    seconds = math.nan
                if not (math.isfinite(seconds) and seconds > 0):
                    raise InvalidStoreURLError(
                        f"Redis URL {redact_url(url)!r}: {name} must be a positive number of seconds"
                    )
        scheme = "rediss" if parts.scheme.lower().startswith("rediss") else "redis"
        driver_url = urlunsplit(parts._replace(scheme=scheme, query=urlencode(params)))
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        try:
            client = redis.Redis.from_url(
                driver_url,
                decode_responses=False,
                socket_connect_timeout=_CONNECT_TIMEOUT,
                socket_timeout=_SOCKET_TIMEOUT,
                # One quick retry on a dropped connection (a pooled connection to a server
                # that restarted); a server that stays down fails within seconds.
                retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1),
                retry_on_error=[redis.ConnectionError],
            )
        except ValueError as exc:  # redis-py: "Invalid value for 'socket_timeout' ..."
            reason = redact_text(str(exc), url_secrets(url))
            raise InvalidStoreURLError(f"Redis URL {redact_url(url)!r}: {reason}") from None
        try:
            # A parameter redis-py takes but cannot use on this connection (ssl_cert_reqs on
            # redis://) or a timeout out of range fails only when a connection is made:
            # made here (outside the pool: it counts only what it made), such a URL is
            # refused as one, not as the driver's TypeError later.
            pool = client.connection_pool
            pool.connection_class(**pool.connection_kwargs).disconnect()
        except (ValueError, TypeError) as exc:
            client.close()
            reason = redact_text(str(exc), url_secrets(url))
            raise InvalidStoreURLError(
                f"Redis URL {redact_url(url)!r}: redis-py refuses its connection parameters ({reason})"
            ) from None
        store = cls(client, key_prefix=key_prefix, url=url, ttl=ttl, database=database)
        return store

    def __repr__(self) -> str:
        return f"<RedisStore {self.url!r} key prefix {self.key_prefix!r}>"

    # -- keys -------------------------------------------------------------------------

    def _head_key(self, task_id: str) -> str:
        return f"{self.key_prefix}task:{task_id}:head"

    def _msgs_key(self, task_id: str) -> str:
        return f"{self.key_prefix}task:{task_id}:msgs"

    @property
    def _index_key(self) -> str:
        return f"{self.key_prefix}index"

    def raw_keys(self, task_id: str) -> tuple[str, str, str]:
        """The keys holding ``task_id``: head hash, messages list, index set.

        For inspection and for tests that damage stored data on purpose.
        """
        return self._head_key(task_id), self._msgs_key(task_id), self._index_key

    @property
    def client(self) -> redis_module.Redis:
        """The underlying redis-py client."""
        return self._client

    # -- errors -----------------------------------------------------------------------

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        redis = self._redis
        try:
            yield
        except redis.AuthenticationError as exc:
            raise StoreUnavailableError(
                f"Redis at {self.url} refused the credentials while trying to {what} "
                f"({redact_text(str(exc), self._secrets)}): "
                "check the password (and user name) in the store URL"
            ) from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailableError(
                f"Redis at {self.url} is unreachable while trying to {what} "
                f"({redact_text(str(exc), self._secrets)}): check "
                "that redis-server is running, that host, port and database in the URL are "
                "right, and for TLS servers that the URL says rediss://"
            ) from None
        except redis.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            # A key of the store (its index, say) holds another kind of value.
            raise StoreUnavailableError(
                f"Redis at {self.url}: a key under key_prefix {self.key_prefix!r} holds a "
                f"value of another kind, so it cannot {what} "
                f"({redact_text(str(exc), self._secrets)}): another program writes under "
                "this prefix; give the store a key_prefix of its own, or remove that key"
            ) from None

    def _wrong_type(self, task_id: str, exc: Exception, what: str) -> Exception:
        """The error for a WRONGTYPE reply: the task's own keys holding another kind of
        value are its damage (a ``delete`` clears them); the index set, shared by every
        task of the prefix, is not, and deleting the task would not help (a CLI round was
        told to delete a task whose index key another program had written)."""
        index_key = self._index_key
        try:
            index_type = self._client.type(index_key)
        except Exception:  # the first error is the one to report
            index_type = None
        if isinstance(index_type, bytes):
            index_type = index_type.decode()
        if index_type not in (None, "none", "set"):
            return StoreUnavailableError(
                f"Redis at {self.url}: the index key {index_key!r} of key_prefix "
                f"{self.key_prefix!r} holds a {index_type}, not a set, so no task can be saved or "
                "loaded: another program writes under this prefix. Give the store a key_prefix "
                "of its own; deleting a task does not help"
            )
        return CorruptCheckpointError(task_id, f"Redis refused to {what} ({exc})")

    # -- CheckpointStore ----------------------------------------------------------------

    def load(self, task_id: str) -> Checkpoint | None:
        """The stored checkpoint, or ``None`` when none exists (damage raises)."""
        check_task_id(task_id)
        head_key, msgs_key, index_key = self.raw_keys(task_id)
        with self._errors("load a checkpoint"):
            pipe = self._client.pipeline(transaction=True)
            pipe.hgetall(head_key)
            pipe.lrange(msgs_key, 0, -1)
            pipe.sismember(index_key, task_id)
            try:
                head, messages, indexed = pipe.execute()
            except self._redis.ResponseError as exc:
                # WRONGTYPE: something else was written at our keys.
                raise self._wrong_type(task_id, exc, "read it") from None
        if not head:
            # With a ttl, an index entry alone is what an expired task leaves (a listing
            # removes it); without one, only damage leaves it.
            if messages or (indexed and self.ttl is None):
                raise CorruptCheckpointError(
                    task_id, "the head is missing but its messages or index entry remain"
                )
            self._tracker.forget(task_id)
            return None
        version, lineage = self._check_head_fields(task_id, head, len(messages))
        copies = self._tracker.copies_for(task_id, version, lineage, len(messages))
        checkpoint = decode_checkpoint(task_id, head[b"body"], messages, copies=copies)
        if checkpoint.version != version:
            raise CorruptCheckpointError(
                task_id, f"head body says version {checkpoint.version}, the record {version}"
            )
        self._tracker.loaded(task_id, version, lineage, checkpoint.messages, copies=copies)
        return checkpoint

    @staticmethod
    def _check_head_fields(
        task_id: str, head: Mapping[bytes, bytes], count: int
    ) -> tuple[int, str]:
        missing = [f for f in (b"version", b"lineage", b"count", b"body") if f not in head]
        if missing:
            names = ", ".join(m.decode() for m in missing)
            raise CorruptCheckpointError(task_id, f"the head lacks {names}")
        try:
            version = int(head[b"version"])
            stored_count = int(head[b"count"])
            lineage = head[b"lineage"].decode("ascii")
        except (ValueError, UnicodeDecodeError):
            raise CorruptCheckpointError(
                task_id, "the head's version, count or lineage is unreadable"
            ) from None
        if stored_count != count:
            raise CorruptCheckpointError(
                task_id, f"the head records {stored_count} messages but {count} are stored"
            )
        return version, lineage

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        """Compare-and-set on ``version``; writes only the new suffix of ``messages``."""
        task_id = check_task_id(task_id_of(checkpoint), saving=True)
        new_version = checkpoint.version + 1
        saved = checkpoint.model_copy(update={"version": new_version, "updated_at": utcnow()})
        head = encode_head(saved)
        plan = self._tracker.plan(checkpoint)
        status, actual = self._run_save(task_id, checkpoint.version, plan, head, saved.status)
        if status == _STALE_PREFIX:
            # What this store knew of the stored history is not what is stored (another
            # writer, a damaged list): write the whole history, still conditional on the
            # version, so a concurrent writer can only cause a conflict.
            plan = WritePlan(True, 0, encode_messages(checkpoint.messages), plan.lineage)
            status, actual = self._run_save(task_id, checkpoint.version, plan, head, saved.status)
        if status == _CONFLICT:
            self._tracker.forget(task_id)
            raise ConflictError(task_id, checkpoint.version, None if actual < 0 else actual)
        if status == _BAD_VERSION:
            self._tracker.forget(task_id)
            raise CorruptCheckpointError(task_id, "the stored version is not an integer")
        if status != _OK:
            self._tracker.forget(task_id)
            raise CorruptCheckpointError(task_id, f"unexpected save status {status}")
        self.bytes_written += len(head) + sum(len(raw) for raw in plan.encoded)
        self._tracker.saved(task_id, new_version, plan, checkpoint.messages)
        return saved

    def _run_save(
        self, task_id: str, expected: int, plan: WritePlan, head: bytes, status: CheckpointStatus
    ) -> tuple[int, int]:
        args: list[bytes | str | int] = [
            expected,
            "r" if plan.rewrite else "a",
            plan.lineage,
            plan.start,
            task_id,
            head,
            expected + 1,
        ]
        if self._ttl_ms is not None:
            args.append(self._ttl_ms if status in EXPIRING_STATUSES else 0)
        args.extend(plan.encoded)
        with self._errors("save a checkpoint"):
            try:
                result = self._script(keys=list(self.raw_keys(task_id)), args=args)
            except self._redis.ResponseError as exc:
                self._tracker.forget(task_id)
                if "WRONGTYPE" in str(exc):
                    raise self._wrong_type(task_id, exc, "write over it") from None
                raise StoreUnavailableError(
                    f"Redis at {self.url} refused the save script ({exc}): check that "
                    "scripting (EVAL/EVALSHA) is allowed for this user"
                ) from None
            except BaseException:
                # Unknown outcome (connection lost mid-script): the snapshot may be wrong.
                self._tracker.forget(task_id)
                raise
        return int(result[0]), int(result[1])

    def delete(self, task_id: str) -> None:
        """Remove the checkpoint (idempotent)."""
        check_task_id(task_id)
        head_key, msgs_key, index_key = self.raw_keys(task_id)
        with self._errors("delete a checkpoint"):
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(head_key, msgs_key)
            pipe.srem(index_key, task_id)
            pipe.execute()
        self._tracker.forget(task_id)

    def list_checkpoints(
        self,
        *,
        status: CheckpointStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_unreadable: OnUnreadable | None = None,
    ) -> list[CheckpointSummary]:
        """Summaries filtered by status and metadata, ordered by ``task_id``."""
        check_listing_filters(status, metadata, on_unreadable)
        with self._errors("list checkpoints"):
            raw_members: Any = self._client.smembers(self._index_key)
            members = sorted(
                raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else str(raw)
                for raw in raw_members
            )
            bodies: list[Any] = []
            for start in range(0, len(members), 500):
                pipe = self._client.pipeline(transaction=False)
                for task_id in members[start : start + 500]:
                    pipe.hget(self._head_key(task_id), "body")
                bodies.extend(pipe.execute(raise_on_error=False))

        def summary_of(task_id: str, body: Any) -> CheckpointSummary:
            if isinstance(body, Exception):
                raise CorruptCheckpointError(task_id, f"Redis refused to read its head ({body})")
            return decode_summary(task_id, body)

        result = []
        gone: list[str] = []
        for task_id, body in zip(members, bodies, strict=True):
            if body is None:
                gone.append(task_id)  # expired, or deleted after the index read
                continue
            summary = summary_or_report(on_unreadable, summary_of, task_id, body)
            if summary is None or not summary_matches(summary, status, metadata):
                continue
            result.append(summary)
        if gone and self.ttl is not None:
            self._prune(gone)
        return result

    def _prune(self, task_ids: list[str]) -> None:
        """Remove the index entries of ``task_ids`` whose keys are all gone (expired).

        Best-effort: the listing is already right without it, and a failure here only
        leaves entries for the next listing to remove.
        """
        for start in range(0, len(task_ids), 500):
            batch = task_ids[start : start + 500]
            keys = [self._index_key]
            for task_id in batch:
                keys.extend((self._head_key(task_id), self._msgs_key(task_id)))
            try:
                self._prune_script(keys=keys, args=batch)
            except self._redis.RedisError:
                return

    def _probe_durability(self) -> tuple[bool | None, tuple[str, ...]]:
        if self._durability is not None:
            return self._durability
        redis = self._redis
        with self._errors("connect"):
            try:
                self._client.ping()
            except redis.ResponseError as exc:
                if "db index" not in str(exc).lower():
                    raise
                raise self._bad_database(exc) from None
            try:
                config = self._client.config_get("append*")
            except redis.ResponseError as exc:
                self._durability = (
                    None,
                    (
                        f"CONFIG GET is not allowed on this server ({exc}), so whether AOF "
                        "persistence is on is unknown; without it every checkpoint is lost "
                        "on restart",
                    ),
                )
                return self._durability
        values = {
            (k.decode() if isinstance(k, bytes) else str(k)): (
                v.decode() if isinstance(v, bytes) else str(v)
            )
            for k, v in config.items()
        }
        appendonly = values.get("appendonly")
        fsync = values.get("appendfsync", "unknown")
        if appendonly is None:
            self._durability = (None, ("the server does not report appendonly",))
        elif appendonly == "yes":
            notes = [f"AOF persistence on (appendfsync {fsync})"]
            if fsync == "everysec":
                notes.append("a machine crash may lose the last second of saves")
            elif fsync == "no":
                notes.append("the OS decides when saves reach disk: a machine crash may lose more")
            self._durability = (True, tuple(notes))
        else:
            self._durability = (
                False,
                ("AOF persistence off: an in-memory-only Redis loses every checkpoint on restart",),
            )
        return self._durability

    def _bad_database(self, exc: Exception) -> InvalidStoreURLError:
        """The server has no database of the index the URL names."""
        index = "" if self._database is None else f" {self._database}"
        return InvalidStoreURLError(
            f"Redis URL {self.url!r}: the server has no database{index} ({exc}); a server has "
            "16 (0 to 15) unless redis.conf sets 'databases': use one it has, such as "
            "redis://host:6379/0"
        )

    def info(self) -> StoreInfo:
        """Backend ``redis``; ``durable`` True only when AOF persistence is on."""
        durable, notes = self._probe_durability()
        if self.ttl is not None:
            notes = (
                *notes,
                f"completed and failed checkpoints expire {self.ttl:g} s after their last save "
                "(Redis key expiry); running ones never do",
            )
        return StoreInfo(
            backend="redis",
            url=self.url,
            durable=durable,
            incremental=True,
            notes=(f"key prefix {self.key_prefix!r}", *notes),
            ttl=self.ttl,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
