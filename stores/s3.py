"""S3 checkpoint store: compare-and-set through conditional writes, incremental history.

Layout under ``s3://bucket/prefix``, per task (``T`` is ``t-`` + the URL-quoted task id):

- ``prefix/T/head.json`` — the *head*: the checkpoint without its messages, plus the list
  of message chunks that make the history, each with its compaction *tier*, and the
  chunks a compaction retired lately (``garbage``);
- ``prefix/T/msgs/<lineage>/<start>-<end>-<token>.json`` — immutable chunks, each a JSON
  array of messages ``start`` (inclusive) to ``end`` (exclusive), one message per line;
- ``prefix/T/index/<lineage>/<start>-<end>-<token>.json`` — immutable lists of chunk
  entries, written by versions before compaction (still read; never written now).

A save writes one new chunk first, then replaces the head conditionally: ``If-None-Match:
*`` to create, ``If-Match: <ETag of the head this store read or wrote>`` to replace. A
412 (or 409) means another writer got there first: :class:`~stores.ConflictError`. The
head is one object, replaced whole, and only ever names chunks that already exist, so a
reader sees the old checkpoint or the new one, never a mix.

Compaction is tiered: a create or a rewrite writes the history as one *sealed* chunk; an
append writes a chunk of tier 0. When the chunks at the end of the history would number
``_FAN_IN`` of one tier, the save's chunk holds all their messages instead (encoded again
from the checkpoint in hand, whose prefix the tracker has checked) and has the next tier.
So a save still writes one chunk and the head (usually only its new messages); a load
reads the head and at most ``_FAN_IN - 1`` chunks per tier, ``log_FAN_IN(saves)`` tiers;
each message is written once per tier it passes. Chunks a compaction retires stay for
``_GARBAGE_GRACE`` versions (a reader that read an older head still finds them; one
slower than that finds one gone, reads the head again and starts over), then the save
that drops them from the head removes them. Chunks of a lineage a rewrite left, or of a
save that lost a race, are removed at once; all removal is best-effort.

A head written before compaction (no ``tiers``, maybe index objects) loads as before;
the first save after it rewrites the history into one chunk.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

from .checkpoint import Checkpoint, CheckpointStatus, CheckpointSummary, utcnow
from .codec import (
    check_task_id,
    decode_checkpoint,
    decode_summary,
    dumps,
    encode_head,
    encode_messages,
    loads,
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
    check_listing_filters,
    summary_matches,
    summary_or_report,
)
from .url import check_params, query_params, redact_text, redact_url, split_url, url_secrets

__all__ = ["S3Store"]

#: Format of the head envelope this code writes and reads.
_FORMAT = 1
#: Compaction fan-in: when a save would leave this many chunks of one tier at the end of
#: the history, it writes one chunk of the next tier holding their messages instead.
#: A head then names at most ``_FAN_IN - 1`` chunks per tier, ``log_FAN_IN(saves)``
#: tiers, and each message is written once per tier it passes through.
_FAN_IN = 4
#: The tier of a chunk written whole by a create or a rewrite: never merged again.
_SEALED = -1
#: Versions a chunk retired by a compaction stays readable (named by the head's
#: ``garbage`` list) before a later save removes it, so that a reader holding an older
#: head still finds it.
_GARBAGE_GRACE = 8
#: Garbage entries a head keeps at most (older ones are removed at once).
_MAX_GARBAGE = 256
#: Parallel GETs when a load reads many chunks.
_READ_WORKERS = 8
#: A load that finds a chunk gone (a concurrent rewrite or compaction collected it) starts over.
_LOAD_ATTEMPTS = 5
#: A save whose If-Match fails while the stored version still matches tries again.
_SAVE_ATTEMPTS = 3
_CONNECT_TIMEOUT = 3
_READ_TIMEOUT = 15
#: Seconds after which an object no head names is garbage for certain (see delete).
_ORPHAN_AGE = 600.0
_TEST_CREDENTIALS = ("agentckpt-test", "agentckpt-test")
_NO_TTL = (
    "S3 stores do not support ttl: they keep checkpoints until they are deleted. Remove "
    "finished checkpoints by listing them with list_checkpoints(status='completed') (and "
    "status='failed') and deleting each, or with a bucket lifecycle rule; an age-based rule "
    "on the store's prefix also expires the old message chunks of running tasks, so let one "
    "reach only finished tasks' objects"
)

#: What botocore accepts as a bucket name (AWS's own rules for new buckets are stricter;
#: legacy buckets and S3-compatible servers allow capitals and underscores).
_BUCKET_NAME = re.compile(r"[A-Za-z0-9._-]{1,255}")

#: The query parameters of an S3 store URL.
_PARAMS = ("endpoint_url", "region")

_Entry = tuple[int, int, str]  # start, end (exclusive), token
_Garbage = tuple[int, int, str, int]  # a retired chunk entry and the version that retired it
_T = TypeVar("_T")


def _import_boto3() -> Any:
    try:
        import boto3
    except ImportError:
        raise MissingDriverError("s3", "s3", "boto3") from None
    return boto3


def _is_loopback(endpoint_url: str | None) -> bool:
    if not endpoint_url:
        return False
    host = urlsplit(endpoint_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bucket_of(url: str, netloc: str) -> str:
    """The bucket an ``s3://`` URL names, exactly as written (S3 bucket names are case-sensitive).

    Not ``urlsplit().hostname``, which lowercases: ``s3://MyBucket`` would open ``mybucket``.
    """
    shown = redact_url(url)
    if not netloc:
        raise InvalidStoreURLError(
            f"{shown!r} names no bucket; use s3://bucket/prefix?endpoint_url=..."
        )
    if "@" in netloc:
        raise InvalidStoreURLError(
            f"{shown!r} has credentials before the bucket, which an S3 store does not use: "
            "remove them and give credentials through the environment (AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY) or a profile"
        )
    if ":" in netloc:
        raise InvalidStoreURLError(
            f"{shown!r}: a bucket has no port; give the server as "
            "s3://bucket/prefix?endpoint_url=http://host:port"
        )
    if not _BUCKET_NAME.fullmatch(netloc):
        raise InvalidStoreURLError(
            f"{shown!r}: {netloc!r} is not a valid S3 bucket name: a bucket name is 1 to 255 "
            "letters, digits, dots, hyphens and underscores (AWS requires 3 to 63 lowercase "
            "letters, digits, dots and hyphens for new buckets)"
        )
    return netloc


@dataclass(frozen=True)
class _Head:
    """What a stored head says, with the ETag it was read or written with."""

    etag: str
    version: int
    lineage: str
    count: int
    chunks: tuple[_Entry, ...]
    indexes: tuple[_Entry, ...]
    fields: dict[str, Any]
    #: The compaction tier of each chunk (``_SEALED`` for a chunk written whole).
    tiers: tuple[int, ...] = ()
    #: Chunks retired by a compaction and not removed yet.
    garbage: tuple[_Garbage, ...] = ()
    #: Written before compaction (no ``tiers``): the next save rewrites it if it has
    #: more than one chunk.
    legacy: bool = False


class _Conflict(Exception):
    pass


def _credentials_of(endpoint_url: str, url: str) -> tuple[str, dict[str, str]]:
    """``endpoint_url`` without its user part, and the access key and secret that part
    names (``http://KEY:SECRET@host:port``), as boto3 takes them.

    boto3 signs requests with credentials, never with a URL's user part: left in the
    endpoint, it would only be logged (botocore's DEBUG log shows every request's URL).
    """
    endpoint = urlsplit(endpoint_url)
    userinfo, at, host = endpoint.netloc.rpartition("@")
    if not at:
        return endpoint_url, {}
    key, colon, secret = userinfo.partition(":")
    if not colon or not key or not secret:
        raise InvalidStoreURLError(
            f"{redact_url(url)!r}: the user part of endpoint_url must be ACCESS_KEY_ID:SECRET "
            "(percent-encoded), or nothing, to take the credentials from the environment "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or a profile"
        )
    credentials = {"aws_access_key_id": unquote(key), "aws_secret_access_key": unquote(secret)}
    return endpoint._replace(netloc=host).geturl(), credentials


class S3Store:
    """A :class:`~stores.CheckpointStore` on S3 or an S3-compatible server (boto3).

    >>> store = S3Store.from_url(  # doctest: +SKIP
    ...     "s3://my-bucket/agents?endpoint_url=http://127.0.0.1:8333&region=us-east-1"
    ... )

    Credentials come from the ``endpoint_url``'s user part (``http://KEY:SECRET@host``)
    if it has one, else from the usual boto3 chain (environment, profile, instance role).
    For a loopback ``endpoint_url`` with no credentials configured, dummy test
    credentials are used, as local test servers accept any.
    """

    def __init__(self, client: Any, bucket: str, prefix: str = "", *, url: str = "") -> None:
        self._client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = redact_url(url or f"s3://{bucket}/{self.prefix}")
        self._secrets = url_secrets(url)
        #: Bytes this store uploaded (heads, chunks, indexes): for incremental-save checks.
        self.bytes_written = 0
        self._tracker = PrefixTracker()
        # The head (and its ETag) this store last read or wrote, per task: a save at that
        # version sends If-Match without reading the head first.
        self._heads: OrderedDict[str, _Head] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )
        from botocore.exceptions import (
            ConnectTimeoutError as BotoConnectTimeout,
        )

        self._ClientError = ClientError
        self._unreachable: tuple[type[Exception], ...] = (
            EndpointConnectionError,
            BotoConnectTimeout,
            ReadTimeoutError,
            ConnectionClosedError,
        )
        self._NoCredentialsError = NoCredentialsError

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> S3Store:
        """``s3://bucket/prefix?endpoint_url=http://127.0.0.1:8333&region=us-east-1``.

        Checks at once that the endpoint answers and the bucket exists, so a wrong URL
        fails here with :class:`~stores.StoreUnavailableError`. ``ttl`` is refused: an S3
        store keeps checkpoints until they are deleted. Other parameters are refused (a
        typo would otherwise go unnoticed). ``create`` changes nothing: opening an S3
        store writes nothing, and a missing bucket is never created
        (:class:`~stores.StoreNotFoundError`).
        """
        parts = split_url(url)
        params = query_params(parts, url)
        if "ttl" in params:
            raise InvalidStoreURLError(f"{redact_url(url)!r}: {_NO_TTL}")
        check_params("S3", url, params, _PARAMS)
        if params.get("endpoint_url"):
            endpoint = split_url(params["endpoint_url"])
            if endpoint.scheme not in ("http", "https") or not endpoint.netloc:
                raise InvalidStoreURLError(
                    f"{redact_url(url)!r}: endpoint_url must be an http:// or https:// URL with a "
                    "host, such as endpoint_url=http://127.0.0.1:8333"
                )
        boto3 = _import_boto3()
        from botocore.config import Config

        bucket = _bucket_of(url, parts.netloc)
        endpoint_url = params.get("endpoint_url") or None
        region = (
            params.get("region")
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1"
        )
        session = boto3.session.Session(region_name=region)
        credentials: dict[str, str] = {}
        if endpoint_url is not None:
            endpoint_url, credentials = _credentials_of(endpoint_url, url)
        if not credentials and _is_loopback(endpoint_url) and session.get_credentials() is None:
            credentials = {
                "aws_access_key_id": _TEST_CREDENTIALS[0],
                "aws_secret_access_key": _TEST_CREDENTIALS[1],
            }
        config = Config(
            connect_timeout=_CONNECT_TIMEOUT,
            read_timeout=_READ_TIMEOUT,
            retries={"max_attempts": 2, "mode": "standard"},
            s3={"addressing_style": "path"} if endpoint_url else {},
            max_pool_connections=_READ_WORKERS * 2,
        )
        client = session.client("s3", endpoint_url=endpoint_url, config=config, **credentials)
        store = cls(client, bucket, unquote(parts.path), url=url)
        store._check_bucket()
        return store

    def __repr__(self) -> str:
        return f"<S3Store {self.url!r}>"

    # -- keys -------------------------------------------------------------------------

    def _root(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

    def task_prefix(self, task_id: str) -> str:
        """The key prefix under which every object of ``task_id`` lives."""
        # Quote everything (slashes, dots) and add a letter, so that no task id can make
        # a path that a filer-backed server would normalise ("..", "//").
        return f"{self._root()}t-{quote(task_id, safe='')}/"

    def head_key(self, task_id: str) -> str:
        """The key of ``task_id``'s head object."""
        return self.task_prefix(task_id) + "head.json"

    def _object_key(self, task_id: str, kind: str, lineage: str, entry: _Entry) -> str:
        start, end, token = entry
        return f"{self.task_prefix(task_id)}{kind}/{lineage}/{start:08d}-{end:08d}-{token}.json"

    def chunk_keys(self, task_id: str) -> list[str]:
        """Every object key stored under ``task_id`` (head, chunks, indexes, orphans)."""
        keys: list[str] = []
        with self._errors("list a task's objects"):
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.task_prefix(task_id)):
                keys.extend(obj["Key"] for obj in page.get("Contents", ()))
        return sorted(keys)

    @property
    def client(self) -> Any:
        """The underlying boto3 S3 client."""
        return self._client

    # -- errors -----------------------------------------------------------------------

    def _code(self, exc: Exception) -> str:
        response = getattr(exc, "response", {}) or {}
        return str(response.get("Error", {}).get("Code", ""))

    def _status(self, exc: Exception) -> int:
        response = getattr(exc, "response", {}) or {}
        return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except self._unreachable as exc:
            raise StoreUnavailableError(
                f"S3 endpoint of {self.url} is unreachable while trying to {what} "
                f"({redact_text(str(exc), self._secrets)}): "
                "check that the server runs and that endpoint_url (scheme, host, port) is right"
            ) from None
        except self._NoCredentialsError:
            raise StoreUnavailableError(
                f"no AWS credentials for {self.url}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
            ) from None
        except self._ClientError as exc:
            code = self._code(exc)
            if code == "NoSuchBucket":
                raise StoreNotFoundError(self._missing_bucket_message()) from None
            if (
                code
                in (
                    "AccessDenied",
                    "InvalidAccessKeyId",
                    "SignatureDoesNotMatch",
                    "InvalidToken",
                    "ExpiredToken",
                )
                or self._status(exc) == 403
            ):
                raise StoreUnavailableError(
                    f"S3 refused the credentials for {self.url} while trying to {what} "
                    f"({code}): check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the "
                    "profile) and that they may read and write the bucket"
                ) from None
            raise

    def _missing_bucket_message(self) -> str:
        return (
            f"bucket {self.bucket!r} does not exist at the endpoint of {self.url}: create it "
            "(e.g. 'aws s3 mb s3://BUCKET --endpoint-url URL') or fix the bucket name"
            + (
                " (bucket names are case-sensitive, and AWS names are lowercase)"
                if self.bucket != self.bucket.lower()
                else ""
            )
        )

    def _check_bucket(self) -> None:
        with self._errors("check the bucket"):
            try:
                self._client.head_bucket(Bucket=self.bucket)
            except self._ClientError as exc:
                if self._status(exc) == 404 or self._code(exc) in ("404", "NoSuchBucket"):
                    raise StoreNotFoundError(self._missing_bucket_message()) from None
                raise

    # -- head envelope ----------------------------------------------------------------

    def _parse_head(self, task_id: str, body: bytes, etag: str) -> _Head:
        envelope = loads(body, task_id=task_id, where="head")
        if not isinstance(envelope, dict) or not isinstance(envelope.get("head"), dict):
            raise CorruptCheckpointError(task_id, "stored head is not a head object")
        if envelope.get("format") != _FORMAT:
            raise CorruptCheckpointError(
                task_id, f"stored head has format {envelope.get('format')!r}, not {_FORMAT}"
            )
        fields: dict[str, Any] = envelope["head"]
        try:
            version = fields["version"]
            lineage = envelope["lineage"]
            count = envelope["count"]
            chunks = tuple(self._entry(e) for e in envelope["chunks"])
            indexes = tuple(self._entry(e) for e in envelope["indexes"])
            if not (isinstance(version, int) and isinstance(count, int)):
                raise TypeError("version and count must be integers")
            if not isinstance(lineage, str) or not lineage.isalnum():
                raise TypeError("lineage must be a token")
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptCheckpointError(task_id, f"stored head is malformed ({exc})") from None
        tiers, legacy = self._tiers(envelope.get("tiers"), chunks)
        garbage = self._garbage(envelope.get("garbage"))
        return _Head(etag, version, lineage, count, chunks, indexes, fields, tiers, garbage, legacy)

    @staticmethod
    def _tiers(raw: Any, chunks: Sequence[_Entry]) -> tuple[tuple[int, ...], bool]:
        """The chunks' tiers, and whether the head predates them (a hint: never damage).

        A head written before compaction (or by a writer that dropped the field) has no
        ``tiers``; its chunks count as sealed, and the next save rewrites the history
        into one chunk when there are several.
        """
        if (
            isinstance(raw, list)
            and len(raw) == len(chunks)
            and all(type(t) is int and t >= _SEALED for t in raw)
        ):
            return tuple(raw), False
        return (_SEALED,) * len(chunks), True

    @classmethod
    def _garbage(cls, raw: Any) -> tuple[_Garbage, ...]:
        """The retired chunks a head lists (malformed entries are skipped: a hint)."""
        if not isinstance(raw, list):
            return ()
        found: list[_Garbage] = []
        for item in raw[:_MAX_GARBAGE]:
            try:
                if not isinstance(item, list) or len(item) != 4 or type(item[3]) is not int:
                    raise ValueError(item)
                found.append((*cls._entry(item[:3]), item[3]))
            except ValueError:
                continue
        return tuple(found)

    @staticmethod
    def _entry(raw: Any) -> _Entry:
        if (
            not isinstance(raw, list)
            or len(raw) != 3
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw[:2])
            or not isinstance(raw[2], str)
            or not raw[2].isalnum()
        ):
            raise ValueError(f"bad chunk entry {raw!r}")
        return int(raw[0]), int(raw[1]), str(raw[2])

    @staticmethod
    def _encode_envelope(
        head: bytes,
        lineage: str,
        count: int,
        chunks: Sequence[_Entry],
        indexes: Sequence[_Entry],
        tiers: Sequence[int],
        garbage: Sequence[_Garbage],
    ) -> bytes:
        store = dumps(
            {
                "format": _FORMAT,
                "lineage": lineage,
                "count": count,
                "chunks": [list(e) for e in chunks],
                "indexes": [list(e) for e in indexes],
                "tiers": list(tiers),
                "garbage": [list(g) for g in garbage],
            }
        )
        # The checkpoint head goes in as the codec encoded it (one serializer).
        return store[:-1] + b',"head":' + head + b"}"

    def _remember(self, task_id: str, head: _Head | None) -> None:
        with self._lock:
            if head is None:
                self._heads.pop(task_id, None)
                return
            self._heads[task_id] = head
            self._heads.move_to_end(task_id)
            while len(self._heads) > 256:
                self._heads.popitem(last=False)

    def _known(self, task_id: str) -> _Head | None:
        with self._lock:
            return self._heads.get(task_id)

    # -- object I/O -------------------------------------------------------------------

    def _get(self, key: str) -> tuple[bytes, str] | None:
        """Body and ETag of ``key``, or None when it does not exist."""
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=key)
        except self._ClientError as exc:
            if self._code(exc) in ("NoSuchKey", "404"):
                return None
            raise
        body: bytes = response["Body"].read()
        return body, str(response["ETag"])

    def _put(self, key: str, body: bytes, **conditions: str) -> str:
        response = self._client.put_object(
            Bucket=self.bucket, Key=key, Body=body, ContentType="application/json", **conditions
        )
        self.bytes_written += len(body)
        return str(response["ETag"])

    def _map(self, fn: Callable[[str], _T], keys: Sequence[str]) -> list[_T]:
        if len(keys) <= 1:
            return [fn(key) for key in keys]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_READ_WORKERS, thread_name_prefix="agentckpt-s3")
            pool = self._pool
        return list(pool.map(fn, keys))

    def _delete_keys(self, keys: Sequence[str]) -> None:
        """Best-effort removal (garbage collection must never fail a save)."""
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            try:
                self._client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            except Exception:
                # Some S3-compatible servers lack DeleteObjects: fall back to one by one.
                for key in batch:
                    with contextlib.suppress(Exception):  # best effort: delete retries
                        self._client.delete_object(Bucket=self.bucket, Key=key)

    def _read_head(self, task_id: str) -> _Head | None:
        found = self._get(self.head_key(task_id))
        if found is None:
            return None
        return self._parse_head(task_id, *found)

    def _chunk_entries(self, task_id: str, head: _Head) -> list[_Entry] | None:
        """Every chunk entry of ``head`` in order, or None if an index object is gone."""
        keys = [self._object_key(task_id, "index", head.lineage, e) for e in head.indexes]
        entries: list[_Entry] = []
        for key, found in zip(keys, self._map(self._get, keys), strict=True):
            if found is None:
                return None
            try:
                raw = loads(found[0], task_id=task_id, where=f"chunk index {key!r}")
                if not isinstance(raw, list):
                    raise TypeError("not a list")
                entries.extend(self._entry(e) for e in raw)
            except (ValueError, TypeError, UnicodeDecodeError) as exc:
                raise CorruptCheckpointError(
                    task_id, f"chunk index {key!r} is unreadable ({exc})"
                ) from None
        entries.extend(head.chunks)
        position = 0
        for start, end, _ in entries:
            if start != position or end < start:
                raise CorruptCheckpointError(
                    task_id, f"the chunks do not cover the history contiguously at {position}"
                )
            position = end
        if position != head.count:
            raise CorruptCheckpointError(
                task_id, f"the chunks hold {position} messages, the head says {head.count}"
            )
        return entries

    # -- CheckpointStore ----------------------------------------------------------------

    def load(self, task_id: str) -> Checkpoint | None:
        """The stored checkpoint, or ``None`` when none exists (damage raises)."""
        check_task_id(task_id)
        with self._errors("load a checkpoint"):
            for _ in range(_LOAD_ATTEMPTS):
                head = self._read_head(task_id)
                if head is None:
                    self._remember(task_id, None)
                    return None
                result = self._load_history(task_id, head)
                if result is not None:
                    return result
                # A chunk the head names is gone: if the head moved on, a concurrent save
                # collected it and we read again; if the head is the same, it is damage.
                again = self._read_head(task_id)
                if again is not None and again.etag == head.etag:
                    raise CorruptCheckpointError(
                        task_id, "a message chunk named by the head is missing"
                    )
        raise StoreUnavailableError(
            f"checkpoint {task_id!r} in {self.url} kept changing while it was read "
            f"({_LOAD_ATTEMPTS} attempts): another writer saves it continuously"
        )

    def _load_history(self, task_id: str, head: _Head) -> Checkpoint | None:
        entries = self._chunk_entries(task_id, head)
        if entries is None:
            return None
        keys = [self._object_key(task_id, "msgs", head.lineage, e) for e in entries]
        bodies = self._map(self._get, keys)
        found_bodies: list[bytes] = []
        for found in bodies:
            if found is None:
                return None
            found_bodies.append(found[0])
        raws: list[Any] = []
        for entry, key, body in zip(entries, keys, found_bodies, strict=True):
            lines = self._split_chunk(body, entry[1] - entry[0])
            raws.extend(
                lines if lines is not None else self._parse_chunk(task_id, key, body, entry)
            )
        copies = self._tracker.copies_for(task_id, head.version, head.lineage, len(raws))
        try:
            # Each message decoded on its own by the codec's fast path, which also makes
            # the tracker's snapshot in the same walk and checks the codec's rules.
            checkpoint = decode_checkpoint(task_id, head.fields, raws, copies=copies)
        except CorruptCheckpointError:
            # Name the damaged chunk (or read a valid chunk laid out differently).
            raws = []
            for entry, key, body in zip(entries, keys, found_bodies, strict=True):
                raws.extend(self._parse_chunk(task_id, key, body, entry))
            copies = self._tracker.copies_for(task_id, head.version, head.lineage, len(raws))
            checkpoint = decode_checkpoint(task_id, head.fields, raws, copies=copies)
        self._remember(task_id, head)
        self._tracker.loaded(
            task_id, head.version, head.lineage, checkpoint.messages, copies=copies
        )
        return checkpoint

    @staticmethod
    def _join_chunk(encoded: Sequence[bytes]) -> bytes:
        """A chunk body: a JSON array of ``encoded``, one message per line.

        The codec's JSON never holds a raw newline (JSON escapes it in strings), so a
        load splits the lines without parsing and decodes each message on its own.
        """
        return b"[" + b",\n".join(encoded) + b"]"

    @staticmethod
    def _split_chunk(body: bytes, count: int) -> list[bytes | str] | None:
        """The messages of a chunk written one per line, or None for another layout.

        Each piece is decoded on its own afterwards; if every piece is one JSON value,
        the pieces are exactly the array's elements (a failure there falls back to
        :meth:`_parse_chunk`, which parses the body whole).
        """
        pieces: list[bytes | str] = []
        if body.isascii():
            pieces.extend(body.decode("ascii").split("\n"))
        else:
            pieces.extend(body.split(b"\n"))
        if len(pieces) != count or count == 0:
            return None
        last = count - 1
        for index, line in enumerate(pieces):
            if index == 0 and line[:1] not in ("[", b"["):
                return None
            if line[-1:] not in (("]", b"]") if index == last else (",", b",")):
                return None
            pieces[index] = line[1 if index == 0 else 0 : -1]
        return pieces

    @staticmethod
    def _parse_chunk(task_id: str, key: str, body: bytes, entry: _Entry) -> list[Any]:
        """A chunk parsed whole (any JSON layout): its messages, checked for their count."""
        messages = loads(
            body, task_id=task_id, where=f"message chunk {key!r}", messages_from=entry[0]
        )
        if not isinstance(messages, list) or len(messages) != entry[1] - entry[0]:
            raise CorruptCheckpointError(
                task_id, f"message chunk {key!r} does not hold messages {entry[0]}-{entry[1]}"
            )
        return messages

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        """Compare-and-set on ``version`` through a conditional PUT of the head."""
        task_id = check_task_id(task_id_of(checkpoint), saving=True)
        expected = checkpoint.version
        saved = checkpoint.model_copy(update={"version": expected + 1, "updated_at": utcnow()})
        with self._errors("save a checkpoint"):
            for _ in range(_SAVE_ATTEMPTS):
                stored = self._stored_for_save(task_id, expected)
                plan = self._plan(checkpoint, stored)
                try:
                    new_head, due = self._write(task_id, saved, checkpoint.messages, stored, plan)
                    break
                except _Conflict:
                    # The head changed since this store read it. The version is the
                    # token: if the head is still at ``expected`` (deleted and created
                    # again, or saved by an older copy of this very state), the next
                    # round reads it and writes over it; otherwise it conflicts.
                    self._tracker.forget(task_id)
                    self._remember(task_id, None)
                except BaseException:
                    # Outcome unknown (the head PUT may have landed): forget what we knew.
                    self._tracker.forget(task_id)
                    self._remember(task_id, None)
                    raise
            else:
                raise ConflictError(task_id, expected, self._read_head_quietly(task_id))
        self._remember(task_id, new_head)
        self._tracker.saved(task_id, new_head.version, plan, checkpoint.messages)
        if stored is not None and new_head.lineage != stored.lineage:
            self._collect_lineage(task_id, stored.lineage)
        elif due:
            # Chunks retired by a compaction at least _GARBAGE_GRACE versions ago.
            self._delete_keys(
                [self._object_key(task_id, "msgs", new_head.lineage, g[:3]) for g in due]
            )
        return saved

    def _plan(self, checkpoint: Checkpoint, stored: _Head | None) -> WritePlan:
        plan = self._tracker.plan(checkpoint, stored_lineage=stored.lineage if stored else None)
        if stored is not None and (
            plan.rewrite
            or plan.lineage != stored.lineage
            or plan.start != stored.count
            or (stored.legacy and len(stored.chunks) + len(stored.indexes) > 1)
        ):
            # What this store knew is not what is stored, or the prefix changed: write the
            # whole history under a lineage of its own, so its chunks never share keys
            # with the history it replaces (collected after the write). A head written
            # before compaction is rewritten so too, once: its history becomes one chunk.
            encoded = plan.encoded if plan.rewrite else encode_messages(checkpoint.messages)
            plan = WritePlan(True, 0, encoded, secrets.token_hex(8))
        return plan

    def _stored_for_save(self, task_id: str, expected: int) -> _Head | None:
        """The head a save at ``expected`` replaces (None to create), or a conflict."""
        known = self._known(task_id)
        if known is not None and known.version == expected and expected > 0:
            return known
        if expected == 0 and known is None:
            return None  # If-None-Match decides; no read needed
        head = self._read_head(task_id)
        actual = None if head is None else head.version
        if (actual or 0) != expected:
            self._tracker.forget(task_id)
            self._remember(task_id, head)
            raise ConflictError(task_id, expected, actual)
        self._remember(task_id, head)
        return head

    def _write(
        self,
        task_id: str,
        saved: Checkpoint,
        messages: Sequence[Any],
        stored: _Head | None,
        plan: WritePlan,
    ) -> tuple[_Head, list[_Garbage]]:
        """Write ``plan``'s chunk, then the head; the head and the garbage now due."""
        chunks: list[_Entry] = []
        tiers: list[int] = []
        indexes: list[_Entry] = []
        garbage: list[_Garbage] = []
        if not plan.rewrite and stored is not None:
            chunks, tiers = list(stored.chunks), list(stored.tiers)
            indexes, garbage = list(stored.indexes), list(stored.garbage)
        written: list[str] = []
        try:
            if plan.encoded:
                if plan.rewrite or stored is None:
                    first, tier, encoded = 0, _SEALED, plan.encoded
                else:
                    first, tier, retired = self._compact(chunks, tiers, plan.start)
                    garbage.extend((*e, saved.version) for e in retired)
                    encoded = plan.encoded
                    if first < plan.start:
                        # The merged range again, from the checkpoint in hand: the
                        # tracker has checked that its prefix is what is stored.
                        encoded = encode_messages(messages[first : plan.start], first) + encoded
                entry = (first, plan.total, secrets.token_hex(4))
                key = self._object_key(task_id, "msgs", plan.lineage, entry)
                self._put(key, self._join_chunk(encoded))
                written.append(key)
                chunks.append(entry)
                tiers.append(tier)
            named = set(chunks)
            due = [
                g
                for number, g in enumerate(garbage)
                if saved.version - g[3] >= _GARBAGE_GRACE
                or len(garbage) - number > _MAX_GARBAGE
                or g[:3] in named  # never: a damaged list must not cost a live chunk
            ]
            garbage = [g for g in garbage if g not in due]
            due = [g for g in due if g[:3] not in named]
            body = self._encode_envelope(
                encode_head(saved), plan.lineage, plan.total, chunks, indexes, tiers, garbage
            )
            conditions = {"IfMatch": stored.etag} if stored else {"IfNoneMatch": "*"}
            try:
                etag = self._put(self.head_key(task_id), body, **conditions)
            except self._ClientError as exc:
                if not self._lost_race(exc):
                    raise
                if self._landed(task_id, body):
                    # A retried PUT whose first attempt succeeded: the write is ours.
                    etag = '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'
                else:
                    raise _Conflict from None
        except _Conflict:
            # Nobody can name these chunks now. (On any other error the head PUT may have
            # landed, so the chunks stay: at worst they are orphans that delete removes.)
            self._delete_keys(written)
            raise
        head = _Head(
            etag,
            saved.version,
            plan.lineage,
            plan.total,
            tuple(chunks),
            tuple(indexes),
            {},
            tuple(tiers),
            tuple(garbage),
        )
        return head, due

    @staticmethod
    def _compact(
        chunks: list[_Entry], tiers: list[int], start: int
    ) -> tuple[int, int, list[_Entry]]:
        """Fold the chunks a new tier-0 chunk from ``start`` completes into it.

        While the chunks at the end of the history with the new chunk's tier number
        ``_FAN_IN`` with it, they are taken off ``chunks`` (and ``tiers``) and the new
        chunk covers them too, one tier up. Returns the new chunk's first message, its
        tier and the retired entries.
        """
        first, tier = start, 0
        retired: list[_Entry] = []
        while True:
            run = 0
            while run < len(tiers) and tiers[-1 - run] == tier:
                run += 1
            if run + 1 < _FAN_IN:
                return first, tier, retired
            first = chunks[-run][0]
            retired[:0] = chunks[-run:]
            del chunks[-run:], tiers[-run:]
            tier += 1

    def _lost_race(self, exc: Exception) -> bool:
        # 412: the condition failed; 409: a concurrent conditional write on the same key;
        # 404 on If-Match: the head was deleted meanwhile (AWS and moto answer so).
        code = self._code(exc)
        if code in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"):
            return True
        return self._status(exc) in (412, 409) and code != "NoSuchBucket"

    def _landed(self, task_id: str, body: bytes) -> bool:
        try:
            found = self._get(self.head_key(task_id))
        except Exception:
            return False
        return found is not None and found[0] == body

    def _read_head_quietly(self, task_id: str) -> int | None:
        try:
            head = self._read_head(task_id)
        except Exception:
            return None
        return None if head is None else head.version

    def _list_objects(self, prefix: str) -> list[tuple[str, float]]:
        """Keys under ``prefix`` with their age in seconds."""
        found: list[tuple[str, Any]] = []
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            found.extend((obj["Key"], obj["LastModified"]) for obj in page.get("Contents", ()))
        now = utcnow()
        return [(key, (now - modified).total_seconds()) for key, modified in found]

    def _collect_lineage(self, task_id: str, lineage: str) -> None:
        """Remove every chunk and index of ``lineage``, which no head can name any more.

        A lineage is a random token drawn for each create and rewrite; once the head has
        left it, a save appending to it fails its If-Match, so its objects are garbage.
        """
        base = self.task_prefix(task_id)
        try:
            keys = [
                key
                for kind in ("msgs", "index")
                for key, _ in self._list_objects(f"{base}{kind}/{lineage}/")
            ]
            self._delete_keys(keys)
        except Exception:  # garbage collection is best effort, never fails a save
            pass

    def delete(self, task_id: str) -> None:
        """Remove the checkpoint and its objects (idempotent)."""
        check_task_id(task_id)
        with self._errors("delete a checkpoint"):
            head = self._read_head_or_none(task_id)
            # The head first: from then on the task does not exist for any reader.
            self._client.delete_object(Bucket=self.bucket, Key=self.head_key(task_id))
            self._remember(task_id, None)
            self._tracker.forget(task_id)
            if head is not None:
                self._collect_lineage(task_id, head.lineage)
            # Objects of other lineages are left by saves that lost a race or crashed, or
            # belong to a create of the same task in flight right now: remove only those
            # clearly older than any save takes.
            stale = [
                key
                for key, age in self._list_objects(self.task_prefix(task_id))
                if age > _ORPHAN_AGE
            ]
            self._delete_keys(stale)

    def _read_head_or_none(self, task_id: str) -> _Head | None:
        try:
            return self._read_head(task_id)
        except CorruptCheckpointError:
            return None  # a damaged head is deleted all the same

    def list_checkpoints(
        self,
        *,
        status: CheckpointStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_unreadable: OnUnreadable | None = None,
    ) -> list[CheckpointSummary]:
        """Summaries filtered by status and metadata, ordered by ``task_id``."""
        check_listing_filters(status, metadata, on_unreadable)
        task_ids: list[str] = []
        with self._errors("list checkpoints"):
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(
                Bucket=self.bucket, Prefix=self._root() + "t-", Delimiter="/"
            ):
                for common in page.get("CommonPrefixes", ()):
                    name = common["Prefix"][len(self._root()) + 2 : -1]
                    task_ids.append(unquote(name))
            task_ids.sort()
            heads = self._map(lambda t: self._get(self.head_key(t)), task_ids)

        def summary_of(task_id: str, found: Any) -> CheckpointSummary:
            return decode_summary(task_id, self._parse_head(task_id, *found).fields)

        result = []
        for task_id, found in zip(task_ids, heads, strict=True):
            if found is None:
                continue  # chunks of an unfinished create, or deleted meanwhile
            summary = summary_or_report(on_unreadable, summary_of, task_id, found)
            if summary is None or not summary_matches(summary, status, metadata):
                continue
            result.append(summary)
        return result

    def info(self) -> StoreInfo:
        """Backend ``s3``: durable and incremental."""
        return StoreInfo(
            backend="s3",
            url=self.url,
            durable=True,
            incremental=True,
            notes=(
                "compare-and-set through conditional writes (If-None-Match / If-Match)",
                "the server must support conditional PUTs (AWS S3, SeaweedFS and moto do)",
            ),
        )

    def close(self) -> None:
        """Stop the read pool and close the client's connections."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self._client.close()
