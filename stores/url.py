"""Store URLs: the one parser, the one redaction, and the one check of parameters.

Backends import these helpers; the backend registry (:mod:`stores.registry`, behind
``open_store``) imports the backends. Nothing here imports a backend, so there is no
import circle.

>>> redact_url("postgresql://app:hunter2@db:5432/agents?sslpassword=s3cret")
'postgresql://app:***@db:5432/agents?sslpassword=***'
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from urllib.parse import SplitResult, parse_qs, quote, unquote, unquote_plus, urlsplit

from .errors import InvalidStoreURLError

__all__ = [
    "DEFAULT_STORE_URL",
    "REDACTED",
    "check_params",
    "is_secret_name",
    "query_params",
    "redact_text",
    "redact_url",
    "resolve_url",
    "split_url",
    "url_secrets",
]

#: Where the reference agent keeps checkpoints when no URL is given.
DEFAULT_STORE_URL = "sqlite:///.agentckpt/checkpoints.db"

#: What a secret is replaced by wherever a URL is shown.
REDACTED = "***"

# A query parameter (or libpq keyword) whose name contains one of these carries a
# secret: password, passwd, sslpassword, secret, aws_secret_access_key, token,
# aws_session_token, oauth_client_secret, api_key, credentials, ... Redacting a harmless
# parameter by mistake costs a little readability; printing a secret cannot be undone.
_SECRET_NAME = re.compile(
    r"pass|pwd|secret|token|credential|api[_-]?key|private[_-]?key|signature|auth",
    re.IGNORECASE,
)
# libpq's key/value form: ``host=db password='it''s' user=app``.
_KEYWORD_VALUE = re.compile(r"(\b[A-Za-z_]+\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)")
# Shorter secrets are not searched for in driver messages: they would garble the text and
# say little.
_MIN_SCRUB = 3


def resolve_url(url: str | None) -> str:
    """``url``, or when it is None ``$AGENTCKPT_STORE_URL``, or :data:`DEFAULT_STORE_URL`.

    >>> resolve_url("memory://")
    'memory://'
    """
    if url is None:
        return os.environ.get("AGENTCKPT_STORE_URL") or DEFAULT_STORE_URL
    return url


def is_secret_name(name: str) -> bool:
    """Whether a URL parameter called ``name`` carries a secret (its value is redacted)."""
    return bool(_SECRET_NAME.search(name))


def _split_query(query: str) -> list[tuple[str, str, str]]:
    """``(raw piece, decoded name, decoded value)`` for each ``name=value`` of a query."""
    pieces = []
    for piece in query.split("&"):
        name, _, value = piece.partition("=")
        pieces.append((piece, unquote_plus(name), unquote_plus(value)))
    return pieces


def _userinfo_end(url: str, parts: SplitResult) -> int:
    """Where the userinfo of ``url`` ends (the index of its ``@``), or -1.

    urlsplit ends the host part at the first ``/``, ``?`` or ``#``, so a password holding
    one of them unencoded (``redis://:pa/ss@host``) is not seen as a password there. The
    drivers vary; the redaction takes the widest reading: the last ``@`` before the query.
    """
    if not parts.netloc:
        return -1
    start = url.find("://") + 3
    stop = len(url)
    for mark in "?#":
        found = url.find(mark, start)
        if found != -1:
            stop = min(stop, found)
    last = url.rfind("@", start)
    if last >= stop and "://" not in url[start:last]:
        # An ``@`` past a ``?`` or ``#``, with no URL nested in a parameter before it: the
        # password may hold an unencoded ``?``, ``#``, ``/`` or ``@`` (``u:p@ss/w?x@host``,
        # which showed ``ss/w?x`` before). The widest reading hides all of it.
        return last
    at = url.rfind("@", start, stop)
    if at == -1 and stop < len(url):
        # A password holding an unencoded ``?`` or ``#`` (``redis://:pa?ss@host``): the
        # first ``@`` ends the userinfo when what comes before it reads as user:password
        # (no ``/``: a query's ``endpoint_url=http://k:pw@host`` has one before its ``@``).
        first = url.find("@", start)
        if first != -1 and ":" in url[start:first] and "/" not in url[start:first]:
            return first
    return at


def redact_url(url: str) -> str:
    """``url`` with every secret replaced by ``***``, safe to print or log.

    Redacted: the password of the userinfo (``user:***@host``); the value of every query
    parameter whose name carries a secret (``password``, ``sslpassword``, ``secret``,
    ``token``, ``aws_secret_access_key``, ...); the same inside a URL given as a parameter
    value (S3's ``endpoint_url=http://key:***@host``); ``password=`` in libpq's key/value
    form (``host=db password=***``). Every store shows its URL through this function:
    errors, ``info().url`` and reprs.

    >>> redact_url("redis://:hunter2@cache:6379/0")
    'redis://:***@cache:6379/0'
    >>> redact_url("s3://bucket/p?endpoint_url=http://key:hunter2@127.0.0.1:8333")
    's3://bucket/p?endpoint_url=http://key:***@127.0.0.1:8333'
    """
    if not isinstance(url, str):
        url = str(url)
    if "://" not in url:
        if "=" in url:  # libpq key/value conninfo
            return _KEYWORD_VALUE.sub(
                lambda m: m.group(1) + REDACTED if is_secret_name(m.group(1)) else m.group(0), url
            )
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        scheme = url.split("://", 1)[0]
        return f"<unparseable {scheme}:// URL>" if scheme.isalnum() else "<unparseable URL>"
    at = _userinfo_end(url, parts)
    if at != -1:
        start = url.find("://") + 3
        userinfo = url[start:at]
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            url = f"{url[:start]}{user}:{REDACTED}{url[at:]}"
            parts = urlsplit(url)
    if not parts.query:
        return url
    pieces = []
    changed = False
    for piece, name, value in _split_query(parts.query):
        if value and is_secret_name(name):
            pieces.append(piece.partition("=")[0] + "=" + REDACTED)
            changed = True
        elif "://" in value or "@" in value:
            inner = redact_url(value) if "://" in value else _redact_authority(value)
            if inner != value:
                pieces.append(piece.partition("=")[0] + "=" + quote(inner, safe=":/@*[]"))
                changed = True
            else:
                pieces.append(piece)
        else:
            pieces.append(piece)
    if not changed:
        return url
    # Rebuilt by hand: urlunsplit would drop the empty host of sqlite:///path.
    before, _, rest = url.partition("?")
    fragment = rest.partition("#")[2]
    return f"{before}?{'&'.join(pieces)}" + (f"#{fragment}" if fragment else "")


def _as_url(value: str) -> str:
    """A parameter value that may be an authority without a scheme (``key:pw@host:9000``,
    ``//key:pw@host``) as a URL whose userinfo the functions here can find."""
    return "x:" + value if value.startswith("//") else "x://" + value


def _redact_authority(value: str) -> str:
    """:func:`redact_url` of a parameter value given without a scheme (an ``endpoint_url``
    of ``key:pw@host:9000``: the driver refuses it, quoting it)."""
    url = _as_url(value)
    prefix = url[: len(url) - len(value)]
    redacted = redact_url(url)
    return redacted[len(prefix):] if redacted.startswith(prefix) else value


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets ``url`` carries (the values :func:`redact_url` hides), longest first.

    Stores keep them to scrub driver messages (:func:`redact_text`), which sometimes
    quote the URL they were given.
    """
    found: set[str] = set()
    pending = [url]
    while pending:
        text = pending.pop()
        if "://" not in text:
            for match in _KEYWORD_VALUE.finditer(text):
                if is_secret_name(match.group(1)):
                    found.add(match.group(2).strip("'"))
            continue
        try:
            parts = urlsplit(text)
        except ValueError:
            continue
        at = _userinfo_end(text, parts)
        if at != -1:
            userinfo = text[text.find("://") + 3 : at]
            if ":" in userinfo:
                raw = userinfo.split(":", 1)[1]
                found.update((raw, unquote(raw)))
        for piece, name, value in _split_query(parts.query):
            raw = piece.partition("=")[2]
            if value and is_secret_name(name):
                found.update((raw, value, unquote(raw)))
            elif "://" in value:
                pending.append(value)
            elif "@" in value:
                pending.append(_as_url(value))
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` (a driver's error message) with each of ``secrets`` replaced by ``***``.

    >>> redact_text('cannot connect to "http://k:hunter2@h"', url_secrets("s3://b?endpoint_url=http://k:hunter2@h"))
    'cannot connect to "http://k:***@h"'
    """
    for secret in secrets:
        if len(secret) >= _MIN_SCRUB:
            text = text.replace(secret, REDACTED)
    return text


def split_url(url: str) -> SplitResult:
    """``urlsplit(url)``, with a malformed URL or port refused as :class:`InvalidStoreURLError`."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
        if parts.netloc.count("@") > 1:
            # ``u:AAAA@BBBB@host``: this parser takes the last ``@``, drivers the first one,
            # and report the host ``BBBB@host``, a piece of the password (an outside round).
            raise ValueError("two '@' in the host part")
    except ValueError as exc:
        if "@" in url:
            # The parser's words may quote a piece of a password it took for the port
            # (``user:pa/ss@host`` reads ``pa`` as the port): none of them are shown.
            reason = (
                "the port is not a number, or the password holds a '/', '?', '#' or '@' "
                "that must be percent-encoded (%2F, %3F, %23, %40)"
            )
        else:
            reason = str(exc)
        raise InvalidStoreURLError(f"malformed store URL {redact_url(url)!r}: {reason}") from None
    return parts


def query_params(parts: SplitResult, url: str | None = None) -> dict[str, str]:
    """The query string of a store URL (``url``, split into ``parts``) as single values.

    A parameter given twice (``?ttl=1d&ttl=2d``) or given no value (``?key_prefix=``,
    ``?ttl``) is refused with :class:`InvalidStoreURLError` naming it: taking one of the
    values, or the default, would be a silent guess.

    >>> query_params(urlsplit("redis://h/0?key_prefix=app:&ttl=7d"))
    {'key_prefix': 'app:', 'ttl': '7d'}
    """
    shown = redact_url(url if url is not None else parts.geturl())
    params: dict[str, str] = {}
    for name, values in parse_qs(parts.query, keep_blank_values=True).items():
        if len(values) > 1:
            raise InvalidStoreURLError(
                f"store URL {shown!r} gives the parameter {name!r} {len(values)} times: "
                "give it once"
            )
        if not values[0]:
            raise InvalidStoreURLError(
                f"store URL {shown!r}: the parameter {name!r} has no value: give it one "
                "or leave it out (it then takes its default)"
            )
        params[name] = values[0]
    return params


def check_params(
    backend: str,
    url: str,
    params: Iterable[str],
    supported: Iterable[str],
    *,
    listed: Iterable[str] | None = None,
    more: str = "",
) -> None:
    """Refuse the parameters of ``url`` that ``backend`` does not know, listing the ones it does.

    ``listed`` (default: all of ``supported``) are the ones the error names, and ``more``
    describes the rest (``"and any libpq connection parameter"``). A near miss is named
    (``tabel_prefix``: did you mean ``table_prefix``?).

    >>> check_params("SQLite", "sqlite:///x.db?ttl=1", ["ttl"], ["busy_timeout", "ttl"])
    """
    known = sorted(set(supported))
    unknown = sorted(set(params) - set(known))
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
        if close:
            hints.append(f"{name!r}: did you mean {close[0]!r}?")
    shown = ", ".join(sorted(set(listed)) if listed is not None else known)
    raise InvalidStoreURLError(
        f"{backend} URL {redact_url(url)!r}: unknown parameter(s) {', '.join(unknown)}"
        + (f" ({'; '.join(hints)})" if hints else "")
        + f"; supported: {shown}"
        + (f", {more}" if more else "")
    )
