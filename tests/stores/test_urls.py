"""Store URLs on every backend: secrets never shown, typos refused, read-only opens create nothing."""

from __future__ import annotations

import re
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

from stores import (
    Checkpoint,
    InvalidStoreURLError,
    StoreError,
    StoreNotFoundError,
    StoreUnavailableError,
    open_store,
    redact_url,
)
from stores.url import redact_text, url_secrets

# Fixed, not random: parametrised test ids carry it, and pytest-xdist workers must agree on them.
SECRET = "hunter2-5ec4e7"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- the one redaction, on every URL form ---------------------------------------------------

REDACTED_FORMS = [
    # userinfo, every backend
    (f"postgresql://app:{SECRET}@db:5432/agents", "postgresql://app:***@db:5432/agents"),
    (f"postgres://app:{SECRET}@db/agents?table_prefix=x_", "postgres://app:***@db/agents?table_prefix=x_"),
    (f"redis://:{SECRET}@cache:6379/0", "redis://:***@cache:6379/0"),
    (f"rediss://user:{SECRET}@cache:6380/1?key_prefix=a:", "rediss://user:***@cache:6380/1?key_prefix=a:"),
    (f"s3://b/p?endpoint_url=http://key:{SECRET}@127.0.0.1:8333", "s3://b/p?endpoint_url=http://key:***@127.0.0.1:8333"),
    # a password holding characters urlsplit ends the host part at
    (f"redis://:pa/ss{SECRET}@cache:6379/0", "redis://:***@cache:6379/0"),
    # percent-encoded userinfo
    ("postgresql://app:p%40ss%2Fword@db/agents", "postgresql://app:***@db/agents"),
    # secret query parameters
    (f"postgresql://app@db/agents?password={SECRET}", "postgresql://app@db/agents?password=***"),
    (f"postgresql://db/agents?sslmode=verify-full&sslpassword={SECRET}", "postgresql://db/agents?sslmode=verify-full&sslpassword=***"),
    (f"redis://cache:6379/0?password={SECRET}&key_prefix=k:", "redis://cache:6379/0?password=***&key_prefix=k:"),
    (f"redis://cache/0?ssl_password={SECRET}", "redis://cache/0?ssl_password=***"),
    (f"s3://b/p?aws_secret_access_key={SECRET}&region=eu-west-1", "s3://b/p?aws_secret_access_key=***&region=eu-west-1"),
    (f"s3://b/p?token={SECRET}", "s3://b/p?token=***"),
    (f"s3://b/p?endpoint_url=http://127.0.0.1:8333/%3Fsecret%3D{SECRET}", None),
    # an endpoint written without its scheme (the driver refuses it, quoting it)
    (f"s3://b/p?endpoint_url=key:{SECRET}@127.0.0.1:9000", "s3://b/p?endpoint_url=key:***@127.0.0.1:9000"),
    (f"s3://b/p?endpoint_url=//key:{SECRET}@127.0.0.1:9000", "s3://b/p?endpoint_url=//key:***@127.0.0.1:9000"),
    (f"sqlite:///x.db?passwd={SECRET}", "sqlite:///x.db?passwd=***"),
    (f"memory://name?secret={SECRET}", "memory://name?secret=***"),
    # libpq key/value conninfo
    (f"host=db dbname=agents password={SECRET} user=app", "host=db dbname=agents password=*** user=app"),
    (f"host=db password='{SECRET} with spaces'", "host=db password=***"),
]  # fmt: skip


@pytest.mark.parametrize(("url", "expected"), REDACTED_FORMS)
def test_redact_url_hides_the_secret_of_every_url_form(url: str, expected: str | None) -> None:
    shown = redact_url(url)
    assert SECRET not in shown
    assert "hunter2" not in shown
    if expected is not None:
        assert shown == expected


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app@db:5432/agents?table_prefix=agentckpt_&sslmode=require",
        "redis://cache:6379/0?key_prefix=agentckpt:",
        "s3://bucket/prefix?endpoint_url=http://127.0.0.1:8333&region=us-east-1",
        "sqlite:///.agentckpt/checkpoints.db",
        "memory://",
    ],
)
def test_redact_url_leaves_a_url_without_secrets_unchanged(url: str) -> None:
    assert redact_url(url) == url


def test_driver_messages_are_scrubbed_of_the_urls_secrets() -> None:
    url = f"s3://b/p?endpoint_url=http://key:{SECRET}@127.0.0.1:1"
    message = f'Could not connect to the endpoint URL: "http://key:{SECRET}@127.0.0.1:1/b"'
    assert SECRET in url_secrets(url)
    assert SECRET not in redact_text(message, url_secrets(url))


# -- redaction on every backend: errors, info().url, repr ----------------------------------


def _assert_hidden(*texts: object) -> None:
    for text in texts:
        assert SECRET not in str(text), text


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://postgres:{SECRET}@127.0.0.1:{{port}}/test?connect_timeout=1",
        f"postgresql://postgres@127.0.0.1:{{port}}/test?password={SECRET}&connect_timeout=1",
        f"redis://:{SECRET}@127.0.0.1:{{port}}/0",
        f"redis://127.0.0.1:{{port}}/0?password={SECRET}",
        f"s3://bucket/p?endpoint_url=http://key:{SECRET}@127.0.0.1:{{port}}",
    ],
)
def test_an_unreachable_store_error_never_shows_the_secret(url: str) -> None:
    with pytest.raises(StoreUnavailableError) as raised:
        open_store(url.format(port=_free_port()))
    _assert_hidden(raised.value, repr(raised.value))
    assert "***" in str(raised.value)


@pytest.mark.parametrize(
    "url",
    [
        f"sqlite:///x.db?password={SECRET}",
        f"memory://m?password={SECRET}",
        f"postgresql://postgres:{SECRET}@127.0.0.1/test?tabel_prefix=x_",
        f"redis://:{SECRET}@127.0.0.1/0?kye_prefix=x",
        f"redis://:{SECRET}@127.0.0.1/abc",
        f"s3://b/p?endpoint_url=http://k:{SECRET}@127.0.0.1:1&regoin=x",
        f"s3://b/p?endpoint_url=k:{SECRET}@127.0.0.1:9000",
        f"s3://b/p?endpoint_url=//k:{SECRET}@127.0.0.1:9000",
        f"postgresql://postgres:{SECRET}@127.0.0.1:notaport/test",
        # Unencoded '?', '#' or '/' in the password (an outside round): the whole password,
        # or the part the parser took for a port, was shown.
        f"postgresql://app:{SECRET}?x@127.0.0.1:1/test",
        f"redis://:{SECRET}#x@127.0.0.1:1/0",
        f"postgresql://app:{SECRET}/x@127.0.0.1:1/test",
        # An unencoded '@' (a CLI round): the part past a '?' in the password was shown,
        # and with two '@' in the host part the driver named the host 'BBBB@127.0.0.1'.
        f"postgresql://app:p@ss:w/rd?x#{SECRET}@127.0.0.1:5432/test",
        f"postgresql://app:AAAA@{SECRET}@127.0.0.1:5432/test",
        f"redis://:AAAA@{SECRET}@127.0.0.1:6379/0",
    ],
)
def test_an_invalid_url_error_never_shows_the_secret(url: str) -> None:
    with pytest.raises(InvalidStoreURLError) as raised:
        open_store(url)
    _assert_hidden(raised.value, redact_url(url))


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("sqlite:///x.db?busy_timeout=-5", "busy_timeout must be an integer number of milliseconds, 0 or more"),
        ("postgresql://127.0.0.1:1/test?pool_max_size=0", "pool_max_size must be at least 1"),
        ("postgresql://127.0.0.1:1/test?pool_min_size=-1", "pool_min_size must be 0 or more"),
        ("postgresql://127.0.0.1:1/test?pool_timeout=nan", "pool_timeout must be a positive number of seconds"),
        ("postgresql://127.0.0.1:1/test?pool_timeout=-1", "pool_timeout must be a positive number of seconds"),
        ("postgresql://127.0.0.1:1/test?connect_timeout=-1", "connect_timeout must be a number of seconds, 0 or more"),
        ("redis://127.0.0.1:1/0?socket_timeout=-1", "socket_timeout must be a positive number of seconds"),
        ("redis://127.0.0.1:1/0?socket_connect_timeout=nan", "socket_connect_timeout must be a positive number"),
        ("redis://127.0.0.1:1/0?ssl_cert_reqs=none", "redis-py refuses its connection parameters"),
    ],
)
def test_a_parameter_out_of_range_is_an_invalid_url_naming_it(url: str, says: str, tmp_path: Path) -> None:
    # An outside round: these reached the Python API as the drivers' ValueError or
    # TypeError (some only at the first call), and pool_timeout=nan or -1 was taken.
    url = url.replace("sqlite:///x.db", f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(InvalidStoreURLError, match=re.escape(says)):
        open_store(url)


@pytest.fixture
def live_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL with a secret in it for each backend, on a server that accepts it."""
    backend = request.param
    ns = "t" + uuid.uuid4().hex[:12]
    if backend == "postgresql":
        base = request.getfixturevalue("agentckpt_postgres_url")
        # The test server trusts every client, so any password is accepted.
        url = f"{base}{'&' if '?' in base else '?'}table_prefix={ns}_&password={SECRET}"
    elif backend == "redis":
        base = request.getfixturevalue("agentckpt_redis_url")
        url = f"{base}{'&' if '?' in base else '?'}key_prefix={ns}:"
        # A server without requirepass accepts a password-only AUTH.
        url = url.replace("redis://", f"redis://:{SECRET}@", 1) if "@" not in url else url
    elif backend == "s3":
        from pytest_agentckpt.services import s3

        endpoint = request.getfixturevalue("agentckpt_moto_endpoint")
        bucket = s3.ensure_bucket(endpoint, "agentckpt-tests")
        secret_endpoint = endpoint.replace("http://", f"http://key:{SECRET}@", 1)
        url = f"s3://{bucket}/{ns}?endpoint_url={secret_endpoint}"
    else:
        url = f"sqlite:///{tmp_path / 'x.db'}"
    return url


@pytest.mark.parametrize("live_url", ["postgresql", "redis", "s3"], indirect=True)
def test_info_url_and_repr_never_show_the_secret(live_url: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_store(live_url)
    except StoreError as exc:  # a server refusing the credentials: the error is checked
        _assert_hidden(exc)
        pytest.skip(f"the test server refused the credentials: {exc}")
    try:
        _assert_hidden(store.info().url, repr(store), store.info())
        assert "***" in store.info().url and "***" in repr(store)
        for note in store.info().notes:
            _assert_hidden(note)
    finally:
        purge(store)


def test_s3_credentials_in_the_endpoint_are_used_and_never_logged(
    agentckpt_moto_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An outside round: left in the endpoint boto3 was given, the user part of
    # endpoint_url (which boto3 never signs with) was in botocore's DEBUG log of each
    # request's URL.
    import logging

    from pytest_agentckpt.services import s3

    bucket = s3.ensure_bucket(agentckpt_moto_endpoint, "agentckpt-tests")
    endpoint = agentckpt_moto_endpoint.replace("http://", f"http://thekey:{SECRET}@", 1)
    with caplog.at_level(logging.DEBUG):
        store = open_store(f"s3://{bucket}/creds-{uuid.uuid4().hex[:8]}?endpoint_url={endpoint}")
        try:
            store.save(Checkpoint(task_id="t", goal="g", messages=[{"role": "user", "content": "g"}]))
            assert store.load("t") is not None
            client = store._client  # type: ignore[attr-defined]
            # The credentials boto3 signs with are the URL's, percent-decoded.
            credentials = client._get_credentials()
            assert (credentials.access_key, credentials.secret_key) == ("thekey", SECRET)
            assert "@" not in client.meta.endpoint_url
        finally:
            purge(store)
    assert any(r.name.startswith("botocore") for r in caplog.records)  # the DEBUG log was on
    assert SECRET not in caplog.text


@pytest.mark.parametrize("user", ["key", "key:", f":{SECRET}"])
def test_s3_an_endpoint_user_part_without_key_and_secret_is_refused(user: str) -> None:
    with pytest.raises(InvalidStoreURLError, match="ACCESS_KEY_ID:SECRET") as raised:
        open_store(f"s3://b/p?endpoint_url=http://{user}@127.0.0.1:{_free_port()}")
    _assert_hidden(raised.value)


def purge(store: Any) -> None:
    from pytest_agentckpt.certify.hooks import hooks_for

    try:
        hook = hooks_for(store).purge
        if hook is not None:
            hook()
        if hasattr(store, "drop_tables"):
            store.drop_tables()
    finally:
        store.close()


# -- typos and bad values refused with the supported parameters ---------------------------


@pytest.mark.parametrize(
    ("url", "listed"),
    [
        ("postgresql://postgres@127.0.0.1/test?tabel_prefix=x_", "did you mean 'table_prefix'"),
        ("redis://127.0.0.1:6379/0?kye_prefix=x:", "did you mean 'key_prefix'"),
        ("sqlite:///x.db?busy_timout=5", "did you mean 'busy_timeout'"),
        ("s3://b/p?endpoint=http://127.0.0.1:1", "supported: endpoint_url, region"),
        ("memory://m?tll=5", "supported: ttl"),
    ],
)
def test_a_mistyped_parameter_is_refused_listing_the_supported_ones(url: str, listed: str) -> None:
    with pytest.raises(InvalidStoreURLError, match="unknown parameter") as raised:
        open_store(url)
    assert listed in str(raised.value)
    assert "supported:" in str(raised.value)


def _closed(scheme: str) -> str:
    """``scheme``://127.0.0.1 on a port nothing listens on: opening it would fail later."""
    return f"{scheme}://127.0.0.1:{_free_port()}"


def _duplicate_urls(tmp_path: Path) -> list[str]:
    return [
        f"sqlite:///{tmp_path / 'x.db'}?ttl=1d&ttl=2d",
        "memory://m?ttl=1d&ttl=2d",
        f"{_closed('redis')}/0?key_prefix=a:&key_prefix=b:",
        f"{_closed('postgresql')}/test?table_prefix=a_&ttl=1d&table_prefix=b_",
        f"s3://b/p?region=eu-west-1&region=us-east-1&endpoint_url={_closed('http')}",
    ]


@pytest.mark.parametrize("index", range(5))
def test_a_parameter_given_twice_is_refused_naming_it(index: int, tmp_path: Path) -> None:
    url = _duplicate_urls(tmp_path)[index]
    with pytest.raises(InvalidStoreURLError, match=r"parameter '(ttl|key_prefix|table_prefix|region)' 2 times") as raised:
        open_store(url)
    assert "give it once" in str(raised.value)
    assert not (tmp_path / "x.db").exists()  # refused before anything was created


def test_a_secret_given_twice_is_refused_without_showing_it() -> None:
    url = f"{_closed('postgresql')}/test?password={SECRET}&password=other-{SECRET}"
    with pytest.raises(InvalidStoreURLError, match="'password' 2 times") as raised:
        open_store(url)
    _assert_hidden(raised.value)


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("key_prefix=", "key_prefix"),  # it was the default agentckpt: prefix
        ("key_prefix", "key_prefix"),
        ("ttl=", "ttl"),
        ("socket_timeout=", "socket_timeout"),
    ],
)
def test_a_redis_parameter_without_a_value_is_refused(query: str, name: str) -> None:
    with pytest.raises(InvalidStoreURLError, match=f"'{name}' has no value: give it one or leave it out"):
        open_store(f"{_closed('redis')}/0?{query}")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///{tmp}/x.db?synchronous=",
        "memory://m?ttl=",
        "postgresql://127.0.0.1:{port}/test?table_prefix=",
        "s3://b/p?region=&endpoint_url=http://127.0.0.1:{port}",
    ],
)
def test_a_parameter_without_a_value_is_refused_on_every_backend(url: str, tmp_path: Path) -> None:
    url = url.format(tmp=tmp_path, port=_free_port())
    with pytest.raises(InvalidStoreURLError, match="has no value"):
        open_store(url)
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("prefix", ["a%00b:", "app%0A:", "%1B[2J:", "x%7F", "%C2%85:"])
def test_a_redis_key_prefix_with_a_control_character_is_refused(prefix: str) -> None:
    with pytest.raises(InvalidStoreURLError, match=r"key_prefix .* holds the control character"):
        open_store(f"{_closed('redis')}/0?key_prefix={prefix}")


@pytest.mark.parametrize(
    "path", ["/abc", "/-1", "/0x1", "/1/2", "/0?db=zero"]
)
def test_a_redis_database_that_is_not_a_number_is_refused(path: str) -> None:
    with pytest.raises(InvalidStoreURLError, match="must be a number"):
        open_store(f"redis://127.0.0.1:{_free_port()}{path}")


def test_a_redis_database_the_server_does_not_have_is_refused(agentckpt_redis_url: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(agentckpt_redis_url)
    url = parts._replace(path="/100000", query="key_prefix=never-written:").geturl()
    with pytest.raises(InvalidStoreURLError, match="no database 100000"):
        open_store(url)


def test_a_libpq_parameter_is_still_accepted(agentckpt_postgres_url: str) -> None:
    sep = "&" if "?" in agentckpt_postgres_url else "?"
    url = f"{agentckpt_postgres_url}{sep}application_name=agentckpt-test&table_prefix=t{uuid.uuid4().hex[:10]}_"
    store = open_store(url)
    purge(store)


# -- create=False: read-only opens create nothing -----------------------------------------


def test_create_false_on_a_missing_sqlite_file_creates_no_directory_and_no_file(
    tmp_path: Path,
) -> None:
    target = tmp_path / "typo" / "dir" / "checkpoints.db"
    with pytest.raises(StoreNotFoundError, match="no SQLite store") as raised:
        open_store(f"sqlite:///{target}", create=False)
    assert str(target) in str(raised.value)
    assert list(tmp_path.iterdir()) == []
    # An existing file that holds no store is not one either, and is left as it was.
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(StoreNotFoundError, match="no checkpoint tables"):
        open_store(f"sqlite:///{empty}", create=False)
    assert empty.read_bytes() == b""


def test_create_false_opens_an_existing_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    writer = open_store(url)
    writer.save(Checkpoint(task_id="t1", goal="kept"))
    writer.close()
    reader = open_store(url, create=False)
    try:
        loaded = reader.load("t1")
        assert loaded is not None and loaded.goal == "kept"
        assert [s.task_id for s in reader.list_checkpoints()] == ["t1"]
    finally:
        reader.close()


def test_create_false_on_missing_postgres_tables_creates_nothing(
    agentckpt_postgres_url: str,
) -> None:
    import psycopg

    prefix = f"t{uuid.uuid4().hex[:12]}_"
    sep = "&" if "?" in agentckpt_postgres_url else "?"
    with pytest.raises(StoreNotFoundError, match=f"tables public.{prefix}"):
        open_store(f"{agentckpt_postgres_url}{sep}table_prefix={prefix}", create=False)
    with psycopg.connect(agentckpt_postgres_url.split("?")[0]) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE %s", (prefix + "%",)
        ).fetchone()
    assert row == (0,)


def test_create_false_opens_existing_postgres_tables(agentckpt_postgres_url: str) -> None:
    sep = "&" if "?" in agentckpt_postgres_url else "?"
    url = f"{agentckpt_postgres_url}{sep}table_prefix=t{uuid.uuid4().hex[:12]}_"
    writer = open_store(url)
    try:
        writer.save(Checkpoint(task_id="t1"))
        reader = open_store(url, create=False)
        try:
            assert reader.load("t1") is not None
        finally:
            reader.close()
    finally:
        purge(writer)


def test_a_missing_s3_bucket_is_store_not_found(agentckpt_moto_endpoint: str) -> None:
    bucket = "no-such-bucket-" + uuid.uuid4().hex[:8]
    for create in (True, False):
        with pytest.raises(StoreNotFoundError, match=f"bucket {bucket!r} does not exist"):
            open_store(f"s3://{bucket}/p?endpoint_url={agentckpt_moto_endpoint}", create=create)


def test_create_false_changes_nothing_for_memory_and_redis(agentckpt_redis_url: str) -> None:
    assert open_store("memory://x", create=False).load("t") is None
    sep = "&" if "?" in agentckpt_redis_url else "?"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = open_store(f"{agentckpt_redis_url}{sep}key_prefix=t{uuid.uuid4().hex}:", create=False)
    try:
        assert store.list_checkpoints() == []
    finally:
        store.close()
