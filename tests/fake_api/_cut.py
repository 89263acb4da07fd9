"""What a cut stream raises: the SDK's own error from anthropic 2.17 on, the transport's before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anthropic
import httpx2
import pytest


@contextmanager
def raises_cut_stream(match: str = "incomplete chunked read") -> Iterator[None]:
    """Expect the error a stream whose connection dropped mid-way raises in the SDK's
    iteration: ``httpx2.RemoteProtocolError``, which anthropic 2.17 and later wrap in an
    ``anthropic.APIConnectionError`` (the protocol error its ``__cause__``)."""
    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as caught:
        yield
    error: BaseException = caught.value
    if isinstance(error, anthropic.APIConnectionError):
        assert isinstance(error.__cause__, httpx2.RemoteProtocolError), repr(error.__cause__)
        error = error.__cause__
    assert match in str(error), str(error)
