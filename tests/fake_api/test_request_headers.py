"""The record keeps a request's headers looked up in any case, on every way in."""

from __future__ import annotations

import anthropic

from reference_agent.offline import FakeMessagesAPI, RequestHeaders
from reference_agent.scripted import CannedModel

GO = [{"role": "user", "content": "hi"}]


def test_request_headers_are_looked_up_in_any_case_and_join_a_name_sent_twice() -> None:
    headers = RequestHeaders.of([(b"X-Api-Key", b"k"), (b"Accept", b"a"), (b"accept", b"b")])
    assert headers["x-api-key"] == headers["X-API-KEY"] == headers.get("X-Api-Key") == "k"
    assert headers["accept"] == "a, b"
    assert "ACCEPT" in headers and "x-missing" not in headers and headers.get("x-missing") is None


def test_the_record_of_an_in_process_request_takes_any_case() -> None:
    api = FakeMessagesAPI(CannedModel(["pong"]))
    api.client(max_retries=0).messages.create(model="m", max_tokens=8, messages=GO)
    headers = api.exchanges[-1].headers
    assert headers["Anthropic-Version"] == headers["anthropic-version"] != ""
    assert "CONTENT-TYPE" in headers


def test_the_record_of_a_request_over_http_takes_any_case() -> None:
    api = FakeMessagesAPI(CannedModel(["pong"]))
    with api.serve() as url:
        anthropic.Anthropic(api_key="k", base_url=url, max_retries=0).messages.create(
            model="m", max_tokens=8, messages=GO
        )
    headers = api.exchanges[-1].headers
    assert headers["ANTHROPIC-VERSION"] == headers["anthropic-version"] != ""
    assert "Content-Type" in headers


def test_rate_limit_headers_of_one_second_are_fresh_lists() -> None:
    from reference_agent.offline import rate_limit_headers

    first, second = rate_limit_headers(), rate_limit_headers()
    assert first == second and first is not second
    first.clear()  # a caller's edit does not reach the next answer
    assert rate_limit_headers() == second
    assert dict(rate_limit_headers(exhausted=True))["anthropic-ratelimit-requests-remaining"] == "0"
    assert dict(rate_limit_headers())["anthropic-ratelimit-requests-remaining"] == "3999"
