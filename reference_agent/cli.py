"""``python -m reference_agent``: run, inspect and demonstrate the checkpointed agent.

Subcommands: ``demo`` (a crash-and-resume demonstration, offline), ``run`` (one task),
``status``, ``list`` and ``inspect`` (what a store holds), ``prune`` and ``delete``.
``--help`` on each says more. Errors print one line, ``error: …``, on stderr (and, with
``--json``, a JSON object on stdout) and exit non-zero: 1 when the input, the agent or the
store failed, 2 for a bad command line, 130 after Ctrl-C and 143 after SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

from stores import (
    Checkpoint,
    CheckpointStatus,
    CheckpointStore,
    CheckpointSummary,
    CorruptCheckpointError,
    StoreError,
    StoreNotFoundError,
    open_store,
    redact_url,
)
from stores.errors import StatusOutOfStepError, UnsupportedSchemaVersionError
from stores.url import DEFAULT_STORE_URL, redact_text, resolve_url, url_secrets

if TYPE_CHECKING:
    from .agent import AgentEvent

__all__ = ["main"]

_PROG = "python -m reference_agent"


class CLIError(Exception):
    """A failure reported as one line, without a traceback."""


class _Terminated(BaseException):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that cleanup runs."""


# -- formatting ----------------------------------------------------------------------


def _short(value: Any, limit: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = _shown(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_event(event: dict[str, Any]) -> str | None:
    """One human line for an agent event (``None`` for events not worth a line).

    >>> describe_event({"event": "iteration", "iteration": 3, "max_iterations": 50})
    'iteration 3/50'
    """
    kind = event.get("event")
    if kind == "iteration":
        return f"iteration {event['iteration']}/{event['max_iterations']}"
    if kind == "model_reply":
        calls = event.get("tool_calls") or []
        what = ("asks for " + ", ".join(calls)) if calls else _short(event.get("text") or "")
        return f"  model ({event.get('stop_reason')}): {what}"
    if kind == "model_reply_cut":
        return "  reply cut off by max_tokens: its tool call was not executed"
    if kind == "tool_call":
        outcome = {
            "ran": "ran",
            "rerun_with_key": "re-run with its recorded idempotency key (no second effect)",
            "rerun": "re-run (the tool is repeat-safe: a repeat has no second effect)",
            "from_ledger": "outcome taken from the ledger (not run again)",
            "unknown": "outcome UNKNOWN: answered as such, not retried",
        }.get(str(event.get("outcome")), str(event.get("outcome")))
        mark = "irreversible " if event.get("irreversible") else ""
        error = " [error result]" if event.get("is_error") and event.get("outcome") != "unknown" else ""
        return f"  {mark}tool {event.get('tool')}: {outcome}{error}"
    if kind == "checkpoint_written":
        return f"  checkpoint v{event.get('version')} written ({event.get('reason')})"
    if kind == "checkpoint_failed":
        return f"  checkpoint write FAILED ({event.get('reason')}): {event.get('error')}"
    if kind == "loaded":
        if not event.get("found"):
            return "no checkpoint: starting the task"
        return f"loaded checkpoint v{event.get('version')} ({event.get('status')})"
    if kind == "resumed":
        pending = event.get("pending") or []
        extra = f", {len(pending)} tool call(s) pending: {', '.join(pending)}" if pending else ""
        return f"resuming at iteration {event.get('iteration')} from v{event.get('version')}{extra}"
    if kind == "repaired":
        steps = event.get("steps") or []
        lines = [line for line, step in zip(event.get("lines") or [], steps, strict=False)
                 if step.get("kind") != "left_pending"]
        pending = len(steps) - len(lines)
        if pending:
            lines.append(f"{pending} unanswered call(s) left for the agent to settle from its ledger")
        return "repair: " + "; ".join(lines)
    if kind == "already_completed":
        return f"task already completed: {_short(event.get('answer') or '')}"
    if kind == "completed":
        return f"completed at iteration {event.get('iteration')}: {_short(event.get('answer') or '')}"
    if kind == "stopped":
        return f"stopped: {event.get('reason')} {event.get('failure') or event.get('error') or ''}".rstrip()
    return None


# -- store access --------------------------------------------------------------------


def _store_url(url: str | None) -> str:
    return resolve_url(url)


def _scrub(text: str, url: str) -> str:
    """``text`` (a driver's message) without the URL's secrets, whatever form they took."""
    return redact_text(text.replace(url, redact_url(url)), url_secrets(url))


def _open(url: str | None, *, read_only: bool = False) -> CheckpointStore:
    """Open the store; a read-only command never creates one (a mistyped path says so)."""
    url = _store_url(url)
    try:
        with warnings.catch_warnings():
            # Durability is judged once, by the commands that run the agent (_require_durable).
            warnings.filterwarnings("ignore", message=".*AOF persistence off")
            return open_store(url, create=not read_only)
    except StoreNotFoundError as exc:
        raise CLIError(
            f"there is no store at {redact_url(url)}: {_scrub(str(exc), url)} "
            "(--store or $AGENTCKPT_STORE_URL)"
        ) from None
    except StoreError as exc:
        raise CLIError(_scrub(str(exc), url)) from None
    except Exception as exc:  # the driver's own errors: a bad URL parameter, a refused db
        raise CLIError(
            f"cannot open the store {redact_url(url)}: {type(exc).__name__}: "
            f"{_scrub(str(exc).strip(), url)}; check the URL's database and query parameters "
            "(a parameter the store does not know goes to the driver)"
        ) from None


def _require_durable(store: CheckpointStore, allow_volatile: bool) -> None:
    """Refuse a store that loses its checkpoints on a restart, unless told to go on."""
    info = store.info()
    # memory:// is in-process by choice; SQLite below synchronous=full still survives a
    # process crash (the URL chose the trade-off). A server that forgets is the danger.
    if info.backend == "memory":
        print("warning: memory:// keeps the checkpoint inside this process only: a task it "
              "does not finish cannot be resumed by another run (give a sqlite:/// URL to "
              "keep it)", file=sys.stderr)
        return
    if info.durable is True or info.backend == "sqlite":
        return
    if info.durable is None:
        note = "; ".join(info.notes) or "the store cannot tell whether its saves survive a restart"
        print(f"warning: {note}", file=sys.stderr)
        return
    if allow_volatile:
        print(f"warning: {info.url} loses every checkpoint when its server restarts "
              "(--allow-volatile-store)", file=sys.stderr)
        return
    store.close()
    fix = ("turn on AOF persistence (CONFIG SET appendonly yes, and 'appendonly yes' in "
           "redis.conf)" if info.backend == "redis" else "make the store persistent")
    raise CLIError(
        f"{info.url} does not survive a restart ({info.backend} with persistence off): "
        f"every checkpoint would be lost and a resume would repeat irreversible actions. "
        f"{fix[0].upper() + fix[1:]}, or pass --allow-volatile-store to run anyway"
    )


def _task_id(value: str) -> str:
    from .agent import check_task_id

    try:
        return check_task_id(value)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _load(store: CheckpointStore, task_id: str) -> Checkpoint:
    checkpoint = store.load(task_id)
    if checkpoint is None:
        raise CLIError(f"no checkpoint for task {task_id!r} in {redact_url(store.info().url)}")
    return checkpoint


def _print_json(value: Any, out: IO[str] | None = None) -> None:
    print(json.dumps(value, ensure_ascii=False, default=str), file=out or sys.stdout, flush=True)


# -- run -----------------------------------------------------------------------------


def _pause_handler(spec: str, *, hold: bool = False) -> Callable[[AgentEvent], None]:
    """For the demo and tests: stop at the event ``kind[:tool]:n``.

    Without ``hold`` it stops dead, for the parent's SIGKILL. With ``hold`` it waits until
    stdin is closed (or a line arrives), then goes on: a signal sent meanwhile finds the
    agent at that exact point.
    """
    parts = spec.split(":")
    kind, nth = parts[0], int(parts[-1])
    tool_name = parts[1] if len(parts) == 3 else None
    seen = [0]

    def handler(event: AgentEvent) -> None:
        if event.kind != kind or (tool_name and event.data.get("tool") != tool_name):
            return
        seen[0] += 1
        if seen[0] == nth:
            _print_json({"event": "held" if hold else "paused", "at": spec, "pid": os.getpid()})
            if hold:
                sys.stdin.readline()
                return
            # Wait for the SIGKILL; bounded, so an abandoned child cannot linger.
            time.sleep(60)
            os._exit(3)

    return handler


class _Output:
    """Progress lines that never stop the agent: a reader that went away (``| head``)
    only silences them, the run goes on to its next checkpoint and its end."""

    def __init__(self) -> None:
        self.gone = False

    def write(self, text: str, stream: IO[str]) -> None:
        if self.gone:
            return
        try:
            print(text, file=stream, flush=True)
        except BrokenPipeError:
            self.gone = True
            _silence_stdout()


def _api_problem(exc: Exception, base_url: str) -> str:
    """One line for an error of the ``anthropic`` SDK; a password in ``base_url`` (or in
    the SDK's message) is shown as ``***``."""
    return _scrub(_api_problem_text(exc, redact_url(base_url)), base_url)


def _api_problem_text(exc: Exception, base_url: str) -> str:
    import anthropic

    if isinstance(exc, anthropic.AuthenticationError):
        return "the Messages API refused the API key (401): set a valid ANTHROPIC_API_KEY"
    if isinstance(exc, anthropic.PermissionDeniedError):
        return "the API key may not use this model or API (403): check ANTHROPIC_API_KEY and --model"
    if isinstance(exc, anthropic.NotFoundError):
        return "the Messages API does not know this model (404): check --model"
    if isinstance(exc, anthropic.APITimeoutError):
        return f"the Messages API at {base_url} did not answer in time: try again later"
    if isinstance(exc, anthropic.APIConnectionError):
        return (f"cannot reach the Messages API at {base_url}: check the network connection "
                "(or ANTHROPIC_BASE_URL)")
    if isinstance(exc, anthropic.APIStatusError):
        detail = " ".join(str(getattr(exc, "message", exc)).split())[:200]
        return f"the Messages API answered HTTP {exc.status_code}: {detail}"
    return f"the Messages API failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def _open_world(path: str | None) -> Any:
    """The World of ``--world``; a path that is no SQLite World is one clear error."""
    import sqlite3

    from .world import World

    if not path:
        return World()
    if Path(path).is_dir():
        raise CLIError(f"--world {path}: that is a directory; give the path of an SQLite file "
                       "(it is created if missing)")
    try:
        return World(path)
    except ValueError as exc:
        raise CLIError(f"--world {path}: {str(exc).removeprefix(f'{Path(path)} ')}; no checkpoint was written") from None
    except sqlite3.Error as exc:
        raise CLIError(f"--world {path}: cannot use it as the World's SQLite file ({exc}); give "
                       "the path of a World file or of a new file in a writable directory; "
                       "no checkpoint was written") from None


def _preflight(client: Any, model: str, goal: str) -> None:
    """Before anything is written: is the key accepted, the API reachable, the model known?

    ``count_tokens`` costs no tokens and answers all three.
    """
    import anthropic

    try:
        client.messages.count_tokens(model=model, messages=[{"role": "user", "content": goal}])
    except anthropic.APIError as exc:
        raise CLIError(f"{_api_problem(exc, str(client.base_url))}; nothing was written") from None


def cmd_run(args: argparse.Namespace) -> int:
    import anthropic

    from .agent import check_goal, run
    from .demo_tools import demo_toolbox
    from .errors import AgentStoppedError

    task_id = _task_id(args.task_id)
    try:
        goal = check_goal(args.goal)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if args.model and not os.environ.get("ANTHROPIC_API_KEY"):
        raise CLIError(
            f"--model {args.model} talks to Claude and needs ANTHROPIC_API_KEY in the "
            "environment; leave --model out to run offline with the scripted model"
        )
    if args.model:
        # Before the store is opened: a bad key or an unreachable API writes nothing.
        # --base-url wins over ANTHROPIC_BASE_URL (a gateway in front of the API); it was
        # dropped without a word, and the key went to the default API.
        client = anthropic.Anthropic(base_url=args.base_url) if args.base_url else anthropic.Anthropic()
        _preflight(client, args.model, goal)
    store = _open(args.store)
    try:
        _require_durable(store, args.allow_volatile_store)
        if args.model:
            model = args.model
        elif args.base_url:
            from .offline import FAKE_API_KEY

            client = anthropic.Anthropic(api_key=FAKE_API_KEY, base_url=args.base_url, max_retries=2)
            model = "claude-scripted"
        else:
            from .demo_tools import demo_plan
            from .offline import FakeMessagesAPI

            client = FakeMessagesAPI(demo_plan()).client()
            model = "claude-scripted"
        world = _open_world(args.world)
        tools = demo_toolbox(world)
        if args.pause_at:
            pause: Callable[[AgentEvent], None] | None = _pause_handler(args.pause_at)
        elif args.hold_at:
            pause = _pause_handler(args.hold_at, hold=True)
        else:
            pause = None
        output = _Output()

        def on_event(event: AgentEvent) -> None:
            if args.json:
                output.write(json.dumps(event.to_dict(), ensure_ascii=False, default=str), sys.stdout)
            else:
                line = describe_event(event.to_dict())
                if line:
                    output.write(line, sys.stderr)
            if pause is not None:
                pause(event)

        kwargs: dict[str, Any] = {}
        if args.max_iterations is not None:
            kwargs["max_iterations"] = args.max_iterations
        try:
            answer = run(
                task_id,
                goal,
                client=client,
                store=store,
                tools=tools,
                model=model,
                checkpoint_every=args.checkpoint_every,
                on_event=on_event,
                **kwargs,
            )
        except AgentStoppedError as exc:
            raise CLIError(str(exc)) from None
        except anthropic.APIError as exc:
            # The agent saved before the call: the task resumes from there.
            raise CLIError(
                f"{_api_problem(exc, str(client.base_url))}; task {task_id!r} keeps its last "
                "checkpoint: run the same command again to resume it"
            ) from None
    finally:
        store.close()
    if args.json:
        output.write(json.dumps({"event": "result", "ok": True, "task_id": task_id, "answer": answer},
                                ensure_ascii=False), sys.stdout)
    else:
        output.write(answer, sys.stdout)
    return 1 if output.gone else 0


# -- status / list / inspect ---------------------------------------------------------


def _failure(checkpoint: Checkpoint) -> str | None:
    state = checkpoint.metadata.get("reference_agent")
    return state.get("failure") if isinstance(state, dict) else None


def cmd_status(args: argparse.Namespace) -> int:
    task_id = _task_id(args.task_id)
    store = _open(args.store, read_only=True)
    try:
        cp = _load(store, task_id)
    finally:
        store.close()
    actions = {s: sum(1 for a in cp.actions if a.state == s) for s in ("intent", "done", "unknown")}
    summary: dict[str, Any] = {
        "task_id": cp.task_id,
        "status": cp.status,
        "iteration": cp.iteration,
        "version": cp.version,
        "messages": len(cp.messages),
        "actions": actions,
        "final_answer": cp.final_answer,
        "failure": _failure(cp),
        "updated_at": cp.updated_at.isoformat(),
    }
    if args.json:
        _print_json(summary)
        return 0
    print(f"{_shown(cp.task_id)}: {cp.status} at iteration {cp.iteration} (checkpoint v{cp.version}, "
          f"{len(cp.messages)} messages, updated {cp.updated_at:%Y-%m-%d %H:%M:%S} UTC)")
    print(f"  irreversible actions: {actions['done']} done, {actions['intent']} pending intent, "
          f"{actions['unknown']} unknown outcome")
    if cp.final_answer is not None:
        print(f"  answer: {_shown(cp.final_answer, keep=chr(10) + chr(9))}")
    if summary["failure"]:
        print(_shown(f"  failure: {summary['failure']}"))
    return 0


def _readable_listing(
    store: CheckpointStore, status: CheckpointStatus | None
) -> tuple[list[CheckpointSummary], list[CorruptCheckpointError | UnsupportedSchemaVersionError]]:
    """The readable tasks' summaries, and the errors of the tasks whose head is unreadable.

    One damaged task does not hide the others: every store the CLI opens is a built-in one
    (``open_store``), and those skip and report such a head (``on_unreadable``, an
    argument beyond the protocol's).
    """
    unreadable: list[CorruptCheckpointError | UnsupportedSchemaVersionError] = []
    lister: Any = store.list_checkpoints
    return list(lister(status=status, on_unreadable=unreadable.append)), unreadable


def _report_unreadable(task_id: str, store_url: str | None, error: BaseException | str | None = None) -> None:
    if isinstance(error, UnsupportedSchemaVersionError):
        print(f"skipped {_shown(task_id)}: written with schema_version {error.found}, which this "
              f"version reads up to {error.supported}; left as it is (upgrade pytest-agentckpt to "
              "read it)", file=sys.stderr)
        return
    if isinstance(error, _Disagrees):
        print(f"skipped {_shown(task_id)}: {error}; left as it is", file=sys.stderr)
        return
    if isinstance(error, StatusOutOfStepError):
        # Never a task to delete: its checkpoint may be a running task's.
        print(f"skipped {_shown(task_id)}: the store lists it as {error.listed}, but its checkpoint says "
              f"{error.stored} (the store's status column is out of step with its checkpoint); left as it is",
              file=sys.stderr)
        return
    print(f"skipped {_shown(task_id)}: unreadable, left as it is "
          f"(to see why: {_task_command('inspect', task_id, store_url)}; "
          f"to delete it: {_delete_command(task_id, store_url)})", file=sys.stderr)


class _Disagrees(Exception):
    """A task the listing shows as finished whose checkpoint says otherwise."""


def cmd_list(args: argparse.Namespace) -> int:
    """List the checkpoints; an unreadable one is named on stderr (exit status 1).

    Only the heads are read (one small row per task on SQLite), never the message
    histories: the status shown is the one last saved, hence ``SAVED STATUS``.
    """
    store = _open(args.store, read_only=True)
    try:
        rows, unreadable = _readable_listing(store, args.status)
    finally:
        store.close()
    for exc in unreadable:
        _report_unreadable(exc.task_id, args.store, exc)
    failed = 1 if unreadable else 0
    if args.json:
        _print_json([r.model_dump(mode="json") for r in rows])
        return failed
    if not rows:
        readable = "readable " if unreadable else ""
        print(f"no {readable}checkpoints" + (f" with status {args.status}" if args.status else ""))
        return failed
    width = max(len(_shown(r.task_id)) for r in rows)
    print(f"{'TASK':<{width}}  {'SAVED STATUS':<12}  {'ITER':>4}  {'VER':>4}  UPDATED (UTC)")
    for r in rows:
        print(f"{_shown(r.task_id):<{width}}  {r.status:<12}  {r.iteration:>4}  {r.version:>4}  "
              f"{r.updated_at:%Y-%m-%d %H:%M:%S}")
    return failed


class _Duration(float):
    """Seconds, remembering how they were written (for messages)."""

    text: str


def _base_url(text: str) -> str:
    """An http:// or https:// URL with a host, checked before anything is written (a CLI
    round's ``--base-url 'not a url'`` wrote a running checkpoint, then failed)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"{redact_url(text)!r} is not an http:// or https:// URL with a host (such as "
            "http://127.0.0.1:8080)"
        )
    return text


def _duration(text: str) -> float:
    from stores.retention import parse_ttl

    try:
        seconds = parse_ttl(text)
    except ValueError as exc:
        message = str(exc).split(";")[0]
        raise argparse.ArgumentTypeError(message[4:] if message.startswith("ttl ") else message) from None
    assert seconds is not None
    duration = _Duration(seconds)
    duration.text = text
    return duration


def cmd_prune(args: argparse.Namespace) -> int:
    """Delete finished checkpoints older than ``--older-than`` (never running ones)."""
    import datetime as _dt

    from stores.checkpoint import utcnow

    # Completed ones unless --status failed: a failed task may be continued (a run that
    # ran out of budget goes on with a larger one), and one pruned starts over, repeating
    # its irreversible actions (a CLI round re-ran a pruned task and created a file twice).
    statuses: tuple[CheckpointStatus, ...] = (args.status,) if args.status else ("completed",)
    try:
        cutoff = utcnow() - _dt.timedelta(seconds=args.older_than)
    except OverflowError:
        raise CLIError(
            f"--older-than {getattr(args.older_than, 'text', args.older_than)} reaches back before the year 1, so no "
            "checkpoint is that old: give a shorter duration (such as 30d)"
        ) from None
    store = _open(args.store, read_only=True)
    pruned: list[dict[str, Any]] = []
    # Why each task was left, by task id: a head whose status cannot be read is listed for
    # every status, and named once.
    skipped_by: dict[str, BaseException] = {}

    def skip(task_id: str, exc: BaseException) -> None:
        skipped_by.setdefault(task_id, exc)

    kept_failed = 0
    try:
        if args.status is None:
            kept_failed = sum(1 for row in _readable_listing(store, "failed")[0] if row.updated_at < cutoff)
        for status in statuses:
            rows, unreadable = _readable_listing(store, status)
            for exc in unreadable:
                skip(exc.task_id, exc)
            for row in rows:
                if row.updated_at >= cutoff:
                    continue
                # Listed, then checked again on the checkpoint itself (a dry run too, so
                # that it says what a prune would do): a task saved since the listing is
                # kept, and so is one whose checkpoint is not the finished one the listing
                # shows (a listing out of step with the checkpoints: never delete on it).
                try:
                    current = store.load(row.task_id)
                except (CorruptCheckpointError, UnsupportedSchemaVersionError) as exc:
                    # One damaged task does not stop the others' pruning.
                    skip(row.task_id, exc)
                    continue
                if current is None or current.version != row.version:
                    continue
                if current.status != status or row.status != status or current.updated_at >= cutoff:
                    skip(row.task_id, _Disagrees(
                        f"the store lists it as {status}, last saved {row.updated_at:%Y-%m-%d %H:%M:%S}, "
                        f"but its checkpoint says {current.status}, last saved "
                        f"{current.updated_at:%Y-%m-%d %H:%M:%S} (the store's listing is out of step with "
                        "its checkpoints)"
                    ))
                    continue
                if not args.dry_run:
                    store.delete(row.task_id)
                pruned.append({"task_id": row.task_id, "status": row.status,
                               "updated_at": row.updated_at.isoformat()})
    finally:
        store.close()
    skipped = [{"task_id": task_id, "error": str(error)} for task_id, error in skipped_by.items()]
    for task_id, error in skipped_by.items():
        _report_unreadable(task_id, args.store, error)
    if args.json:
        _print_json({"dry_run": args.dry_run, "pruned": pruned, "skipped": skipped, "kept_failed": kept_failed})
        return 1 if skipped else 0
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {len(pruned)} {'/'.join(statuses)} checkpoint{'s' * (len(pruned) != 1)} "
          f"last saved before {cutoff:%Y-%m-%d %H:%M:%S} UTC")
    for entry in pruned:
        print(f"  {_shown(entry['task_id'])}  {entry['status']}  {entry['updated_at'][:19]}")
    if kept_failed:
        print(f"kept {kept_failed} failed checkpoint{'s' * (kept_failed != 1)} as old: a failed task may be "
              "continued (one that ran out of budget goes on with a larger one), and one pruned starts "
              "over, repeating its irreversible actions; add --status failed to prune them")
    return 1 if skipped else 0


def _shown(text: str, keep: str = "") -> str:
    """``text`` safe to print on a terminal: each character that is not printable (a
    newline, an escape sequence's ESC, a bidi control) written as its escape, so that a
    stored task id or text cannot forge output lines or move the cursor; ``keep``: the
    characters left as they are (the newlines and tabs of a multi-line answer).

    >>> _shown("t1"), _shown("a\\nb\\x1b[2J"), _shown("one\\ntwo", keep="\\n")
    ('t1', 'a\\\\nb\\\\x1b[2J', 'one\\ntwo')
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def _shell_quoted(text: str) -> str:
    """``text`` as one shell word that a terminal shows as it is: ``shlex.quote`` for a
    printable text, bash's ``$'...'`` with escapes for one that is not."""
    if text.isprintable():
        return shlex.quote(text)
    escaped = "".join(
        c if c.isprintable() and c not in "\\'" else ("\\" + c if c in "\\'" else f"\\U{ord(c):08x}")
        for c in text
    )
    return f"$'{escaped}'"


def _task_command(subcommand: str, task_id: str, store_url: str | None) -> str:
    """The command line of ``subcommand`` on one task, its store URL's secrets hidden."""
    store = f" --store {shlex.quote(redact_url(store_url))}" if store_url else ""
    return f"{_PROG} {subcommand} {_shell_quoted(task_id)}{store}"


def _delete_command(task_id: str, store_url: str | None) -> str:
    return _task_command("delete", task_id, store_url)


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete one task's checkpoint, whatever its state (a corrupt one included)."""
    task_id = _task_id(args.task_id)
    if not args.yes and not sys.stdin.isatty():
        raise CLIError(
            f"delete asks for confirmation, and stdin is not a terminal: pass --yes to delete "
            f"task {task_id!r} without asking"
        )
    store = _open(args.store, read_only=True)
    try:
        try:
            cp = store.load(task_id)
            state = None if cp is None else (
                f"{cp.status} at iteration {cp.iteration}, "
                f"{sum(1 for a in cp.actions if a.state == 'done')} irreversible action(s) done"
            )
            running = cp is not None and cp.status == "running"
        except (CorruptCheckpointError, UnsupportedSchemaVersionError) as exc:
            state, running = f"unreadable: {exc}", False
        if state is None:
            raise CLIError(f"no checkpoint for task {task_id!r} in {redact_url(store.info().url)}; "
                           "nothing deleted")
        if not args.yes:
            warning = (" It is still running: a new run of this id starts over and repeats its "
                       "irreversible actions." if running else "")
            print(f"task {task_id!r}: {state}.{warning}", file=sys.stderr)
            try:
                reply = input(f"Delete task {task_id!r}? [y/N] ")
            except EOFError:
                reply = ""
            if reply.strip().lower() not in ("y", "yes"):
                raise CLIError(f"task {task_id!r} was not deleted (not confirmed)")
        store.delete(task_id)
    finally:
        store.close()
    if args.json:
        _print_json({"ok": True, "deleted": task_id})
    else:
        print(f"deleted task {task_id!r} ({state})")
    return 0


def _describe_block(block: Any) -> str:
    if not isinstance(block, dict):
        # Damage a resume refuses; inspect shows it as it is stored.
        return f"(not a content block: {_short(block, 50)})"
    kind = block.get("type")
    if kind == "text":
        return f"text: {_short(block.get('text', ''))}"
    if kind == "tool_use":
        return f"tool_use {block.get('name')} [{block.get('id')}] {_short(block.get('input'), 50)}"
    if kind == "tool_result":
        error = " ERROR" if block.get("is_error") else ""
        return f"tool_result [{block.get('tool_use_id')}]{error}: {_short(block.get('content'), 50)}"
    if kind == "thinking":
        return f"thinking ({len(str(block.get('thinking', '')))} chars, signed)"
    return str(kind)


def _damaged_head(
    store: CheckpointStore, task_id: str
) -> tuple[CheckpointSummary | None, CorruptCheckpointError | UnsupportedSchemaVersionError | None]:
    """What a listing reads of a task whose checkpoint cannot be loaded: its head (status,
    iteration, version, metadata as last saved; readable when the damage is in the message
    history) or, when the head is damaged too, the error reading it gave. Only reads.

    Every store can list, and a listing reads the heads apart from the histories, so this
    works on each backend; it reads the other tasks' heads too (inspecting damage is rare).
    """
    rows, unreadable = _readable_listing(store, None)
    head = next((row for row in rows if row.task_id == task_id), None)
    error = next((exc for exc in unreadable if exc.task_id == task_id), None)
    return head, error


def _inspect_damaged(args: argparse.Namespace, store: CheckpointStore, task_id: str,
                     exc: CorruptCheckpointError) -> int:
    """``inspect`` of a checkpoint that cannot be loaded: that it is damaged and why (the
    store's error), and what can still be read; exit status 1, as ``status`` gives."""
    head, head_error = _damaged_head(store, task_id)
    message = redact_text(" ".join(_corrupt_message(args, exc).split()), _secrets(args))
    reason = redact_text(" ".join(exc.reason.split()), _secrets(args))
    head_problem = None if head_error is None else redact_text(" ".join(
        (head_error.reason if isinstance(head_error, CorruptCheckpointError) else str(head_error)).split()
    ), _secrets(args))
    if args.json:
        print(f"error: {message}", file=sys.stderr, flush=True)
        _print_json({
            "ok": False, "error": message, "exit_status": 1, "task_id": task_id, "damaged": True,
            "reason": reason,
            "head": None if head is None else head.model_dump(mode="json"),
            "head_error": head_problem,
            "delete_command": _delete_command(task_id, args.store),
        })
        return 1
    print(f"task {_shown(task_id)}  DAMAGED: its checkpoint cannot be loaded (a run or status refuses it)")
    print(_shown(f"why: {reason}"))
    if head is not None:
        print(f"saved head (read apart from the message history): status={head.status}  "
              f"iteration={head.iteration}  version={head.version}  "
              f"updated {head.updated_at:%Y-%m-%d %H:%M:%S} UTC")
        state = head.metadata.get("reference_agent")
        if isinstance(state, dict) and state.get("failure"):
            print(_shown(f"failure: {state['failure']}"))
        user_metadata = {k: v for k, v in head.metadata.items() if k != "reference_agent"}
        if user_metadata:
            print(f"metadata: {_short(user_metadata, 200)}")
    elif head_problem is not None:
        print(_shown(f"saved head: unreadable too ({head_problem})"))
    else:
        print("saved head: not listed by the store (deleted or rewritten since the load?)")
    print("The stored data was left as it is. Restore it from a backup, or delete the task to "
          f"start over (a running task's new run repeats its irreversible actions): "
          f"{_delete_command(task_id, args.store)}")
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 1


def cmd_inspect(args: argparse.Namespace) -> int:
    task_id = _task_id(args.task_id)
    store = _open(args.store, read_only=True)
    try:
        try:
            cp = _load(store, task_id)
        except CorruptCheckpointError as exc:
            # The corruption error says "inspect it": show what can be read, change nothing.
            return _inspect_damaged(args, store, task_id, exc)
    finally:
        store.close()
    if args.json:
        _print_json(cp.model_dump(mode="json"))
        return 0
    print(f"task {_shown(cp.task_id)}  status={cp.status}  iteration={cp.iteration}  version={cp.version}")
    print(f"goal: {_shown(cp.goal, keep=chr(10) + chr(9))}")
    print(f"created {cp.created_at:%Y-%m-%d %H:%M:%S}  updated {cp.updated_at:%Y-%m-%d %H:%M:%S} UTC")
    if cp.final_answer is not None:
        print(f"final answer: {_shown(cp.final_answer, keep=chr(10) + chr(9))}")
    if _failure(cp):
        print(_shown(f"failure: {_failure(cp)}"))
    user_metadata = {k: v for k, v in cp.metadata.items() if k != "reference_agent"}
    if user_metadata:
        print(f"metadata: {_short(user_metadata, 200)}")
    print(f"completed sub-tasks: {len(cp.completed_tasks)}  artifacts: {len(cp.artifacts)}")
    print(f"ledger ({len(cp.actions)} irreversible actions):")
    for a in cp.actions:
        result = _short(a.result.content, 40) if a.result else "-"
        print(_shown(f"  {a.state:<7} {a.tool_name} [{a.tool_use_id}] key={a.idempotency_key[:22]}… {result}"))
    print(f"messages ({len(cp.messages)}):")
    for i, message in enumerate(cp.messages):
        content = message.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = content
        else:
            blocks = [] if content is None else [content]
        first, *rest = [_describe_block(b) for b in blocks] or ["(empty)"]
        print(_shown(f"  {i:>3} {message.get('role', '?'):<9} {first}"))
        for line in rest:
            print(_shown(f"  {'':>3} {'':<9} {line}"))
    return 0


# -- demo ----------------------------------------------------------------------------

_KILL_KINDS = ("iteration", "model_reply", "effect", "checkpoint")


@dataclass(frozen=True)
class KillPoint:
    """Where the demo SIGKILLs the agent: the ``nth`` event of a kind in the child."""

    spec: str
    description: str


def choose_kill_point(rng: random.Random, *, resumed: bool = False) -> KillPoint:
    """A kill point for the demo plan, drawn from ``rng`` (so ``--seed`` reproduces it).

    Events are counted inside one agent process, so the points of a resumed process
    (``resumed=True``) are early ones that its shorter run still reaches.

    >>> choose_kill_point(random.Random(1)) == choose_kill_point(random.Random(1))
    True
    """
    kind = rng.choice(_KILL_KINDS)
    if resumed:
        if kind in ("iteration", "model_reply"):
            return KillPoint("model_reply:1", "after the resumed agent's first model reply, "
                             "before it was saved")
        if kind == "effect":
            tool = rng.choice(["write_record", "send_message"])
            return KillPoint(f"tool_call:{tool}:1", f"mid tool call, if {tool} runs again: "
                             "after its effect, before its outcome is checkpointed")
        n = rng.randint(1, 3)
        return KillPoint(f"checkpoint_written:{n}", f"right after the resumed agent's checkpoint write #{n}")
    if kind == "iteration":
        n = rng.randint(2, 7)
        return KillPoint(f"iteration:{n}", f"at the start of iteration {n}, before the model call")
    if kind == "model_reply":
        n = rng.randint(1, 7)
        return KillPoint(
            f"model_reply:{n}", f"in iteration {n}, after the model replied, before the reply was saved"
        )
    if kind == "effect":
        # Tools that honour keys: killed after the effect, before its outcome is saved.
        tool, n = rng.choice([("write_record", 1), ("send_message", 1), ("write_record", 2)])
        return KillPoint(
            f"tool_call:{tool}:{n}",
            f"mid tool call: {tool} took effect, its outcome not yet checkpointed",
        )
    n = rng.randint(2, 21)
    return KillPoint(f"checkpoint_written:{n}", f"right after checkpoint write #{n}")


@dataclass
class _Child:
    pid: int
    events: list[dict[str, Any]] = field(default_factory=list)
    killed: bool = False
    exit_code: int | None = None
    stderr: str = ""


class _DemoOutput:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def line(self, text: str = "") -> None:
        if not self.as_json:
            print(text, flush=True)


def _child_command(
    task_id: str,
    goal: str,
    store_url: str,
    base_url: str,
    world_path: Path,
    *,
    allow_volatile: bool = False,
    pause_at: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The demo's agent process: its command line, and its environment.

    The store URL goes in the environment (``$AGENTCKPT_STORE_URL``, which ``run`` reads
    when ``--store`` is not given), never on the command line: ``ps`` shows every user
    each process's arguments, and the URL may carry a password. A process's environment
    is readable by its owner (and root) alone.
    """
    command = [sys.executable, "-m", "reference_agent", "run", "--task-id", task_id,
               "--goal", goal, "--base-url", base_url, "--world", str(world_path), "--json"]
    if allow_volatile:
        command.append("--allow-volatile-store")
    if pause_at:
        command += ["--pause-at", pause_at]
    return command, {**os.environ, "AGENTCKPT_STORE_URL": store_url}


def _run_child(
    command: list[str], out: _DemoOutput, pause: bool, timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> _Child:
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        child = _Child(proc.pid)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                lines.put(raw)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    raw = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    proc.kill()
                    proc.wait()
                    raise CLIError(f"the agent process {proc.pid} made no progress for {timeout:.0f}s") from None
                if raw is None:
                    break
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue
                if event.get("event") == "paused":
                    if pause:
                        os.kill(proc.pid, signal.SIGKILL)
                        child.killed = True
                        out.line(f"  ✗ SIGKILL to pid {proc.pid}")
                    continue
                child.events.append(event)
                text = describe_event(event)
                if text:
                    out.line(f"  {text}")
        except BaseException:
            # Ctrl-C, SIGTERM or an error here: the agent process does not outlive the demo.
            proc.kill()
            proc.wait()
            raise
        child.exit_code = proc.wait(timeout=timeout)
        errors.seek(0)
        child.stderr = errors.read()
    return child


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo_tools import DEMO_GOAL, demo_plan, demo_toolbox
    from .offline import FakeMessagesAPI
    from .toolbox import ToolSpec
    from .world import World

    if args.store and _store_backend(args.store) == "memory":
        raise CLIError(
            "the demo SIGKILLs its agent process and resumes the task in a new one; a "
            "memory:// store lives inside one process and cannot survive that: give a "
            "sqlite:///, postgresql://, redis:// or s3:// URL, or leave --store out"
        )
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10_000)
    reproduce = _reproduce_command(args, seed)
    rng = random.Random(seed)
    kills = [choose_kill_point(rng, resumed=n > 0) for n in range(args.kills)]
    out = _DemoOutput(args.json)
    plan = demo_plan()
    expected: dict[str, int] = {}
    for step in plan.steps:
        for call in step.calls:
            expected[call.name] = expected.get(call.name, 0) + 1
    with tempfile.TemporaryDirectory(prefix="agentckpt-demo-") as tmp:
        store_url = args.store or f"sqlite:///{Path(tmp) / 'checkpoints.db'}"
        task_id = f"demo-{seed}-{uuid.uuid4().hex[:6]}"
        world_path = Path(tmp) / "world.db"
        world = World(world_path)
        store = _open(store_url)
        try:
            _require_durable(store, args.allow_volatile_store)
        except CLIError:
            world.close()
            raise
        api = FakeMessagesAPI(plan)
        out.line(f"agentckpt demo, seed {seed}: a {len(plan.steps)}-step task with "
                 f"{sum(expected[t] for t in expected if demo_toolbox(world).spec(t).irreversible)} "
                 "irreversible actions")
        out.line(f"  store {redact_url(store_url) if args.store else 'sqlite (temporary directory)'}; "
                 "model: scripted, behind the real SDK over loopback HTTP")
        for n, kill in enumerate(kills, 1):
            out.line(f"  kill {n}: {kill.description}")
        children: list[_Child] = []
        started = time.monotonic()
        with api.serve() as base_url:
            for attempt in range(len(kills) + 2):
                pause = kills[attempt] if attempt < len(kills) else None
                out.line()
                out.line(f"[agent process {attempt + 1}]" + (" (resumed)" if attempt else ""))
                command, env = _child_command(
                    task_id, DEMO_GOAL, store_url, base_url, world_path,
                    allow_volatile=args.allow_volatile_store, pause_at=pause.spec if pause else None,
                )
                child = _run_child(command, out, pause=pause is not None, env=env)
                children.append(child)
                if not child.killed:
                    if pause is not None:
                        out.line(f"  (kill {attempt + 1} not reached: the task finished first)")
                    break
        elapsed = time.monotonic() - started
        # Running the completed task again: any model or tool call would show here.
        touched: list[str] = []

        class _NoClient:
            def __getattr__(self, name: str) -> Any:
                touched.append(f"client.{name}")
                raise AssertionError("a completed task must not call the model")

        def forbid(spec: ToolSpec) -> Callable[..., Any]:
            def call(**kwargs: Any) -> Any:
                touched.append(spec.name)
                raise AssertionError("a completed task must not call a tool")

            return call

        from .agent import run

        again = run(task_id, DEMO_GOAL, client=_NoClient(),  # type: ignore[arg-type]
                    store=store, tools=demo_toolbox(world).replace_functions(forbid))
        final = store.load(task_id)
        store.close()
        checks = _demo_checks(api, world, expected, children, final, plan.final_answer, again, touched)
        world.close()
    ok = all(c["ok"] for c in checks)
    if args.json:
        _print_json({
            "seed": seed,
            "store": redact_url(args.store) if args.store else None,
            "reproduce": reproduce,
            "ok": ok,
            "kill_points": [k.spec for k in kills],
            "kill_descriptions": [k.description for k in kills],
            "processes": [
                {"pid": c.pid, "killed": c.killed, "exit_code": c.exit_code, "events": c.events}
                for c in children
            ],
            "checks": checks,
            "seconds": round(elapsed, 2),
        })
    else:
        out.line()
        out.line("checks:")
        for check in checks:
            out.line(f"  {'✓' if check['ok'] else '✗'} {check['detail']}")
        out.line()
        out.line(f"{'all checks hold' if ok else 'SOME CHECKS FAILED'}; agent processes took "
                 f"{elapsed:.1f}s. Reproduce: {reproduce}")
    if not ok:
        for c in children:
            if c.exit_code not in (0, -signal.SIGKILL) and c.stderr:
                print(c.stderr.strip().splitlines()[-1], file=sys.stderr)
    return 0 if ok else 1


def _store_backend(url: str) -> str:
    scheme = url.split("://", 1)[0].lower().split("+", 1)[0]
    return scheme


def _reproduce_command(args: argparse.Namespace, seed: int) -> str:
    """The demo command line that replays this scenario: every option that shapes it.

    >>> _reproduce_command(argparse.Namespace(kills=2, store="sqlite:///t.db",
    ...                    allow_volatile_store=False), 7)
    'python -m reference_agent demo --seed 7 --kills 2 --store sqlite:///t.db'
    """
    words = ["demo", "--seed", str(seed), "--kills", str(args.kills)]
    if args.store:
        # A password is shown as ***: the line carries no secret.
        words += ["--store", redact_url(args.store)]
    if args.allow_volatile_store:
        words.append("--allow-volatile-store")
    return f"{_PROG} {shlex.join(words)}"


def _demo_checks(
    api: Any,
    world: Any,
    expected: dict[str, int],
    children: list[_Child],
    final: Checkpoint | None,
    expected_answer: str,
    again: str,
    touched: list[str],
) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append({"name": name, "ok": bool(ok), "detail": detail})

    killed = sum(c.killed for c in children)
    check("killed", killed >= 1 and not children[-1].killed,
          f"the agent was SIGKILLed {killed} time(s) and resumed to the end")
    rejected = [e.status for e in api.exchanges if e.status != 200]
    check("valid_requests", not rejected and not api.server_errors,
          f"every request the model received was a valid history "
          f"({len(api.exchanges)} requests, {len(rejected)} rejected)")
    for tool in ("write_record", "send_message", "create_file"):
        happened = len(world.effects(tool))
        check(f"once:{tool}", happened == expected.get(tool, 0),
              f"{tool}: {happened} effect(s) in the World for {expected.get(tool, 0)} call(s) "
              "in the plan — exactly once")
    answer = final.final_answer if final else None
    check("answer", final is not None and final.status == "completed" and answer == expected_answer,
          f"final answer equals the uninterrupted run's: {answer!r}")
    iterations = [int(e["iteration"]) for c in children for e in c.events
                  if e.get("event") in ("checkpoint_written", "resumed")]
    check("iterations", iterations == sorted(iterations),
          f"the iteration count never went backwards ({iterations[0] if iterations else 0} → "
          f"{iterations[-1] if iterations else 0} over {len(iterations)} checkpoints and resumes)")
    resumed = [e for c in children[1:] for e in c.events if e.get("event") == "resumed"]
    settled = [e for c in children[1:] for e in c.events
               if e.get("event") == "tool_call" and e.get("outcome") != "ran"]
    detail = "; ".join(f"{e['tool']}: {e['outcome']}" for e in settled) or "no pending action"
    check("resume", len(resumed) == killed,
          f"each restart resumed from its checkpoint (not from zero); settled: {detail}")
    check("completed_again", again == answer and not touched,
          "running the completed task again returned its answer with 0 model and 0 tool calls")
    return checks


# -- argument parsing ----------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


class _CommandParser(_Parser):
    """A command's parser: an argument it does not know is its own error, shown with its
    usage (argparse hands it to the top-level parser, whose usage omits the command)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _at_least_one(text: str) -> int:
    """A count option's value: an int >= 1 (a bad one is the command's usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


_STORE_EXAMPLES = (
    "e.g. sqlite:///tasks.db, postgresql://user@host/db, redis://host:6379/0, "
    "s3://bucket/prefix?endpoint_url=…"
)


def _store_option(parser: argparse.ArgumentParser, *, default: str | None = None) -> None:
    default = default or f"$AGENTCKPT_STORE_URL, else {DEFAULT_STORE_URL}"
    parser.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help=f"checkpoint store URL (default: {default}); {_STORE_EXAMPLES}",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m reference_agent``."""
    parser = _Parser(
        prog=_PROG,
        description="The reference checkpointed agent: it survives crashes, resumes where it "
        "stopped, and performs irreversible actions exactly once.",
        epilog=f"Start with: {_PROG} demo",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_CommandParser)

    demo = sub.add_parser(
        "demo",
        help="run a multi-step task offline, SIGKILL the agent, resume it, check the outcome",
        description="Runs a 6-step task offline (a scripted model behind the real anthropic "
        "SDK, an embedded SQLite store, a World in an SQLite file) in a child process, "
        "SIGKILLs it at a random point (sometimes between an irreversible effect and its "
        "checkpoint), resumes it, and prints a timeline and checks: every request valid, "
        "every irreversible action exactly once, same answer as an uninterrupted run, "
        "iterations never backwards. Exit status 0 when every check holds.",
    )
    demo.add_argument("--seed", type=int, default=None, help="reproduce a run (default: random, printed)")
    demo.add_argument("--kills", type=int, default=1, choices=range(1, 6), metavar="N",
                      help="how many times to SIGKILL the agent (1-5, default 1)")
    _store_option(demo, default="a SQLite file in a temporary directory, removed afterwards")
    demo.set_defaults(store=None)
    _volatile_option(demo)
    demo.add_argument("--json", action="store_true", help="print one JSON report instead of the timeline")
    demo.set_defaults(func=cmd_demo)

    run_p = sub.add_parser(
        "run",
        help="run (or resume) one task",
        description="Runs task ID to its answer, resuming from its checkpoint if it was begun. "
        "Offline by default: a scripted model that follows the demo plan, behind the real SDK. "
        "With --model NAME and ANTHROPIC_API_KEY set it talks to Claude. The tools are the "
        "demo's (search, fetch_page, write_record, send_message, create_file). Progress goes "
        "to stderr; the answer to stdout.",
    )
    run_p.add_argument("--task-id", required=True, metavar="ID", help="the task's id (its checkpoint key)")
    run_p.add_argument("--goal", required=True, metavar="TEXT", help="what the agent is asked to do")
    _store_option(run_p)
    _volatile_option(run_p)
    run_p.add_argument("--model", metavar="NAME", default=None,
                       help="a Claude model (needs ANTHROPIC_API_KEY), e.g. the default "
                       "reference_agent.DEFAULT_MODEL; default: the offline scripted model")
    run_p.add_argument("--max-iterations", type=_at_least_one, default=None, metavar="N",
                       help="model calls allowed over the task's life, restarts included (default 50)")
    run_p.add_argument("--checkpoint-every", type=_at_least_one, default=1, metavar="N",
                       help="routine checkpoint every N iterations (default 1); saves around "
                       "irreversible actions always happen")
    run_p.add_argument("--world", metavar="PATH", default=None,
                       help="SQLite file for the World the tools act on (default: in-process)")
    run_p.add_argument("--base-url", metavar="URL", default=None, type=_base_url,
                       help="a Messages API (such as the demo's offline fake) to talk to")
    run_p.add_argument("--json", action="store_true", help="events and the result as JSON lines on stdout")
    run_p.add_argument("--pause-at", default=None, help=argparse.SUPPRESS)
    run_p.add_argument("--hold-at", default=None, help=argparse.SUPPRESS)
    run_p.set_defaults(func=cmd_run)

    status = sub.add_parser("status", help="one task's status", description="Shows one task's status, "
                            "iteration, checkpoint version, ledger counts and answer or failure.")
    status.add_argument("task_id", metavar="ID")
    _store_option(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(func=cmd_status)

    list_p = sub.add_parser("list", help="the tasks in a store", description="Lists the stored "
                            "checkpoints, optionally only those with one status. It reads each "
                            "task's head (status, iteration and version as last saved), not "
                            "its message history: a task whose messages are damaged shows its "
                            "saved status, and 'status ID' (which reads the whole checkpoint) "
                            "reports the damage.")
    list_p.add_argument("--status", choices=("running", "completed", "failed"), default=None)
    _store_option(list_p)
    list_p.add_argument("--json", action="store_true", help="machine-readable output")
    list_p.set_defaults(func=cmd_list)

    inspect = sub.add_parser("inspect", help="a stored checkpoint, readable",
                             description="Prints a stored checkpoint: state, ledger of "
                             "irreversible actions, and the message history block by block. "
                             "On a checkpoint that cannot be loaded it says why and shows what "
                             "can still be read (its saved head), changes nothing, and exits 1.")
    inspect.add_argument("task_id", metavar="ID")
    _store_option(inspect)
    inspect.add_argument("--json", action="store_true", help="the whole checkpoint as JSON")
    inspect.set_defaults(func=cmd_inspect)

    prune = sub.add_parser(
        "prune", help="delete finished checkpoints older than a duration",
        description="Deletes completed and failed checkpoints last saved longer ago than "
        "--older-than (a task re-run after that starts over). Running checkpoints are never "
        "deleted: their resume would repeat every irreversible action. Works on every store; "
        "stores built with ?ttl= expire finished checkpoints on their own.",
    )
    prune.add_argument("--older-than", required=True, type=_duration, metavar="DURATION",
                       help="seconds, or a number with a unit s, m, h, d or w (e.g. 30d)")
    prune.add_argument("--status", choices=("completed", "failed"), default=None,
                       help="the status to prune (default: completed; a failed task may be continued "
                            "with a larger budget, so failed ones go only when asked)")
    _store_option(prune)
    prune.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    prune.add_argument("--json", action="store_true", help="machine-readable output")
    prune.set_defaults(func=cmd_prune)

    delete = sub.add_parser(
        "delete", help="delete one task's checkpoint (a running or corrupt one too)",
        description="Deletes the checkpoint of task ID, whatever its state: the way to clear "
        "a corrupt checkpoint, or a task that should start over. A running task's ledger "
        "goes with it, so a new run of that id repeats its irreversible actions. Asks for "
        "confirmation on a terminal; --yes skips the question (needed when stdin is not a "
        "terminal).",
    )
    delete.add_argument("task_id", metavar="ID")
    _store_option(delete)
    delete.add_argument("--yes", action="store_true", help="delete without asking")
    delete.add_argument("--json", action="store_true", help="machine-readable output")
    delete.set_defaults(func=cmd_delete)
    return parser


def _volatile_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-volatile-store", action="store_true",
        help="run on a store that loses its checkpoints when its server restarts (a Redis "
        "without AOF persistence), which is refused otherwise",
    )


def _silence_stdout() -> None:
    """After a reader closed our stdout (``| head``): the standard way, per Python's docs,
    so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (a test's capture)
        pass


#: The stop signals this command received. A library may catch the exception a signal
#: raised and raise its own (pydantic wraps a KeyboardInterrupt raised while it builds a
#: schema in a SchemaError): the command still reports the stop, not an error.
_STOPS: list[int] = []


def _on_sigterm(signum: int, frame: object) -> None:
    _STOPS.append(signal.SIGTERM)
    raise _Terminated()


def _on_sigint(signum: int, frame: object) -> None:
    _STOPS.append(signal.SIGINT)
    raise KeyboardInterrupt


def _stopped(args: argparse.Namespace, task: str, signum: int) -> int:
    where = (
        "; run the same command again to resume it from its last checkpoint (a task stopped "
        "before its first save starts afresh)"
        if args.command == "run"
        else ""
    )
    if signum == signal.SIGTERM:
        print(f"terminated (SIGTERM): {task} stopped{where}", file=sys.stderr)
        return 143
    print(f"interrupted (Ctrl-C): {task} stopped{where}", file=sys.stderr)
    return 130


def _fail(args: argparse.Namespace, message: str, status: int = 1) -> int:
    message = redact_text(" ".join(message.split()), _secrets(args))
    print(f"error: {message}", file=sys.stderr, flush=True)
    if getattr(args, "json", False):
        error: dict[str, Any] = {"ok": False, "error": message, "exit_status": status}
        if args.command == "run":
            error = {"event": "result", **error}
        try:
            # ASCII: the message may quote undecodable input that stdout cannot encode.
            print(json.dumps(error), flush=True)
        except BrokenPipeError:
            _silence_stdout()
    return status


def _corrupt_message(args: argparse.Namespace, exc: StoreError) -> str:
    task_id = getattr(exc, "task_id", None)
    if not isinstance(task_id, str):
        return str(exc)
    return f"{exc} (to delete it: {_delete_command(task_id, getattr(args, 'store', None))})"


class _RedactingFilter(logging.Filter):
    """Replaces the given secrets with ``***`` in every record a handler writes: the
    drivers' DEBUG logs (botocore, httpx, the SDK) quote the URLs they were given."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        scrubbed = redact_text(message, self.secrets)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info),
                                          self.secrets)
        return True


def _secrets(args: argparse.Namespace) -> list[str]:
    """The secrets of the store URL, the Messages API's URL and the API key, longest first."""
    secrets: set[str] = set()
    store = getattr(args, "store", None)
    for url in (_store_url(store) if isinstance(store, str) or store is None else None,
                getattr(args, "base_url", None), os.environ.get("ANTHROPIC_BASE_URL")):
        if isinstance(url, str):
            secrets.update(url_secrets(url))
    key = os.environ.get("ANTHROPIC_API_KEY") or ""
    if len(key) >= 16:  # a real key; a short placeholder would mask common words
        secrets.add(key)
    return sorted(secrets, key=len, reverse=True)


def _redact_logs(args: argparse.Namespace) -> None:
    """Keep the secrets out of the log lines (``-v`` logs the drivers at DEBUG level)."""
    secrets = _secrets(args)
    if secrets:
        for handler in logging.getLogger().handlers:
            handler.addFilter(_RedactingFilter(secrets))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m reference_agent``; returns the exit status.

    >>> main(["list", "--store", "memory://"])
    no checkpoints
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    _redact_logs(args)
    previous_sigterm: Any = None
    previous_sigint: Any = None
    _STOPS.clear()
    if threading.current_thread() is threading.main_thread():
        previous_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous_sigint = signal.signal(signal.SIGINT, _on_sigint)
    task = f"task {args.task_id!r}" if isinstance(getattr(args, "task_id", None), str) else "the command"
    try:
        status = int(args.func(args))
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # The reader went away (``| head``): exit quietly, as Python's docs advise.
        _silence_stdout()
        return 1
    except CLIError as exc:
        return _fail(args, str(exc))
    except (CorruptCheckpointError, UnsupportedSchemaVersionError) as exc:
        return _fail(args, _corrupt_message(args, exc))
    except StoreError as exc:
        if _STOPS:
            return _stopped(args, task, _STOPS[0])
        return _fail(args, _scrub(str(exc), _store_url(getattr(args, "store", None))))
    except (OSError, ValueError) as exc:  # a file we cannot use; input a layer below refused
        if _STOPS:
            return _stopped(args, task, _STOPS[0])
        return _fail(args, str(exc))
    except KeyboardInterrupt:
        return _stopped(args, task, signal.SIGINT)
    except _Terminated:
        return _stopped(args, task, signal.SIGTERM)
    except Exception as exc:  # a bug of ours: one line, the traceback with -v
        if _STOPS:  # a library turned the signal's exception into one of its own
            return _stopped(args, task, _STOPS[0])
        if args.verbose:
            print(redact_text(traceback.format_exc(), _secrets(args)), end="", file=sys.stderr)
        return _fail(args, f"unexpected {type(exc).__name__}: {exc} (run with -v before the "
                     "command for the traceback, and please report it)")
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
