"""Message Batches and Models for the fake Messages API.

:class:`BatchStore` serves ``messages.batches.create / retrieve / list / cancel / delete /
results`` as the API does: a batch is ``in_progress`` when created and has ``ended`` by the
next read (its requests are answered then, each validated as a ``messages.create``; an
invalid one gets an ``errored`` result with the API's error), a batch canceled before that
ends with every request ``canceled``, and the results are the API's JSONL. The
:data:`MODELS` catalogue serves ``models.list / retrieve``.

>>> page([{"id": "a"}, {"id": "b"}, {"id": "c"}], {"limit": ["2"]})["last_id"]
'b'
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = ["MODELS", "BatchStore", "model_info", "page"]

#: The models ``models.list`` returns, newest first; ``models.retrieve`` knows these and
#: any model a request has named.
MODELS: tuple[tuple[str, str], ...] = (
    ("claude-sonnet-5-5", "Claude Sonnet 5.5"),
    ("claude-opus-4-6", "Claude Opus 4.6"),
    ("claude-sonnet-4-6", "Claude Sonnet 4.6"),
    ("claude-haiku-4-5", "Claude Haiku 4.5"),
    ("claude-scripted", "Scripted model (offline)"),
)
_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def model_info(model_id: str, display_name: str | None = None, rank: int = 0) -> dict[str, Any]:
    """The API's ``ModelInfo`` JSON for ``model_id``."""
    return {
        "type": "model",
        "id": model_id,
        "display_name": display_name or model_id,
        "created_at": _stamp(_EPOCH - timedelta(days=rank)),
        "lifecycle": "active",
        "deprecated_at": None,
        "retires_at": None,
        "max_input_tokens": 200000,
        "max_tokens": 64000,
    }


def page(items: Sequence[Mapping[str, Any]], query: Mapping[str, list[str]]) -> dict[str, Any]:
    """One page of ``items`` for the API's ``limit`` / ``after_id`` / ``before_id`` cursors."""
    try:
        limit = int((query.get("limit") or ["20"])[0])
    except ValueError:
        limit = 20
    limit = max(1, min(limit, 1000))
    ids = [str(item["id"]) for item in items]
    start, stop = 0, len(items)
    after = next(iter(query.get("after_id") or ()), None)
    before = next(iter(query.get("before_id") or ()), None)
    if after in ids:
        start = ids.index(after) + 1
    if before in ids:
        stop = ids.index(before)
        start = max(start, stop - limit)
    chosen = list(items[start:stop][:limit])
    has_more = (start + len(chosen) < stop) if before not in ids else start > 0
    return {
        "data": chosen,
        "has_more": has_more,
        "first_id": chosen[0]["id"] if chosen else None,
        "last_id": chosen[-1]["id"] if chosen else None,
    }


@dataclass
class _Batch:
    id: str
    created: datetime
    requests: list[dict[str, Any]]
    base_url: str
    status: str = "in_progress"
    cancel_at: datetime | None = None
    ended: datetime | None = None
    results: list[dict[str, Any]] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if self.status == "ended":
            for line in self.results:
                counts[line["result"]["type"]] += 1
        else:
            counts["processing"] = len(self.requests)
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": counts,
            "created_at": _stamp(self.created),
            "expires_at": _stamp(self.created + timedelta(hours=24)),
            "ended_at": _stamp(self.ended) if self.ended else None,
            "cancel_initiated_at": _stamp(self.cancel_at) if self.cancel_at else None,
            "archived_at": None,
            "results_url": (
                f"{self.base_url}/v1/messages/batches/{self.id}/results"
                if self.status == "ended"
                else None
            ),
        }


#: ``answer(params, custom_id)`` -> ``("succeeded", Message JSON)`` or
#: ``("errored", error body)``.
Answer = Callable[[dict[str, Any], str], tuple[str, dict[str, Any]]]


class BatchError(Exception):
    """A batch request the API refuses: HTTP ``status`` and the API's error type."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type


class BatchStore:
    """The batches a fake holds (see the module docstring)."""

    def __init__(self, answer: Answer) -> None:
        self._answer = answer
        self._batches: dict[str, _Batch] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def create(self, body: Mapping[str, Any], base_url: str) -> dict[str, Any]:
        """``POST /v1/messages/batches``."""
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise BatchError(400, "invalid_request_error", "requests: Field required")
        seen: set[str] = set()
        for i, item in enumerate(requests):
            if not isinstance(item, Mapping):
                raise BatchError(
                    400, "invalid_request_error", f"requests.{i}: Input should be an object"
                )
            custom_id = item.get("custom_id")
            if not isinstance(custom_id, str) or not custom_id:
                raise BatchError(
                    400, "invalid_request_error", f"requests.{i}.custom_id: Field required"
                )
            if custom_id in seen:
                raise BatchError(
                    400,
                    "invalid_request_error",
                    f"requests.{i}.custom_id: Duplicate custom_id {custom_id!r}; "
                    "each request in a batch needs its own",
                )
            seen.add(custom_id)
            if not isinstance(item.get("params"), Mapping):
                raise BatchError(
                    400, "invalid_request_error", f"requests.{i}.params: Field required"
                )
        n = next(self._ids)
        digest = hashlib.sha256(str(n).encode()).hexdigest()[:20]
        batch = _Batch(
            id=f"msgbatch_{n:04d}{digest}",
            created=_EPOCH + timedelta(minutes=n),
            requests=[dict(r) for r in requests],
            base_url=base_url,
        )
        with self._lock:
            self._batches[batch.id] = batch
        return batch.json()

    def _get(self, batch_id: str) -> _Batch:
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None:
            raise BatchError(404, "not_found_error", f"message batch {batch_id!r} not found")
        return batch

    def _settle(self, batch: _Batch) -> None:
        # A batch ends by the read after its creation: answer (or cancel) its requests.
        if batch.status == "ended":
            return
        results = []
        for item in batch.requests:
            custom_id = str(item["custom_id"])
            if batch.status == "canceling":
                results.append({"custom_id": custom_id, "result": {"type": "canceled"}})
                continue
            kind, payload = self._answer(dict(item["params"]), custom_id)
            key = "message" if kind == "succeeded" else "error"
            results.append({"custom_id": custom_id, "result": {"type": kind, key: payload}})
        batch.results = results
        batch.status = "ended"
        batch.ended = batch.created + timedelta(minutes=1)
        batch.requests = [
            {"custom_id": r["custom_id"], "params": {}} for r in batch.requests
        ]  # answered: the params are not needed again

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        """``GET /v1/messages/batches/{id}``."""
        batch = self._get(batch_id)
        self._settle(batch)
        return batch.json()

    def listing(self, query: Mapping[str, list[str]]) -> dict[str, Any]:
        """``GET /v1/messages/batches``: newest first."""
        with self._lock:
            batches = list(self._batches.values())[::-1]
        for batch in batches:
            self._settle(batch)
        return page([b.json() for b in batches], query)

    def cancel(self, batch_id: str) -> dict[str, Any]:
        """``POST /v1/messages/batches/{id}/cancel``."""
        batch = self._get(batch_id)
        if batch.status == "in_progress":
            batch.status = "canceling"
            batch.cancel_at = batch.created + timedelta(seconds=30)
        return batch.json()

    def delete(self, batch_id: str) -> dict[str, Any]:
        """``DELETE /v1/messages/batches/{id}``: only an ended batch."""
        batch = self._get(batch_id)
        if batch.status != "ended":
            raise BatchError(
                400,
                "invalid_request_error",
                f"Batch {batch_id!r} cannot be deleted while it is {batch.status}; "
                "cancel it and wait for it to end first",
            )
        with self._lock:
            self._batches.pop(batch_id, None)
        return {"id": batch_id, "type": "message_batch_deleted"}

    def results(self, batch_id: str) -> list[dict[str, Any]]:
        """``GET /v1/messages/batches/{id}/results``: one JSON object per request."""
        batch = self._get(batch_id)
        if batch.status != "ended":
            raise BatchError(
                400,
                "invalid_request_error",
                f"Batch {batch_id!r} is still {batch.status}; its results are not ready",
            )
        return batch.results
