"""Figures for the report: save and load latency at several history sizes, bytes per save.

Each size gets a task of its own with ``size`` messages of realistic length; then the
suite appends one message and saves, and loads, ``repeats`` times each. Bytes per save
come from the store's ``bytes_written`` counter when it has one.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from stores import Checkpoint
from stores.codec import encode_message

from .context import CertifyContext

__all__ = ["SIZES", "measure_figures"]

#: History sizes (messages) the latencies are measured at.
SIZES = (10, 100, 1000)


def _message(index: int) -> dict[str, Any]:
    if index % 2 == 0:
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{index}",
                                             "content": "result line " * 12}]}
    return {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look at that. " * 4},
        {"type": "tool_use", "id": f"toolu_{index + 1}", "name": "search",
         "input": {"query": f"query {index}", "limit": 10}},
    ]}


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure_figures(ctx: CertifyContext) -> dict[str, Any]:
    """Latency p50/p99 (milliseconds) of save and load per size, and bytes per save."""
    store = ctx.new_store()
    counter = ctx.hooks(store).bytes_written
    repeats = ctx.budget.latency_repeats
    rows = []
    for size in SIZES:
        task_id = ctx.task_id(f"fig{size}")
        current = store.save(Checkpoint(task_id=task_id, messages=[_message(i) for i in range(size)]))
        saves, loads, written = [], [], []
        for step in range(repeats):
            following = current.model_copy(
                update={"messages": [*current.messages, _message(size + step)]}
            )
            before = counter() if counter else 0
            started = time.perf_counter()
            current = store.save(following)
            saves.append((time.perf_counter() - started) * 1000)
            if counter:
                written.append(counter() - before)
            started = time.perf_counter()
            store.load(task_id)
            loads.append((time.perf_counter() - started) * 1000)
        store.delete(task_id)
        rows.append({
            "messages": size,
            "save_p50_ms": round(_percentile(saves, 0.5), 3),
            "save_p99_ms": round(_percentile(saves, 0.99), 3),
            "load_p50_ms": round(_percentile(loads, 0.5), 3),
            "load_p99_ms": round(_percentile(loads, 0.99), 3),
            "bytes_per_save": round(statistics.mean(written)) if written else None,
            "history_bytes": sum(len(encode_message(m)) for m in current.messages),
        })
    return {"repeats": repeats, "latency": rows}
