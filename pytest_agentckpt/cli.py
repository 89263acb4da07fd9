"""The ``agentckpt`` command line.

.. code-block:: console

    $ agentckpt certify mypackage.stores:make_store --quick --json report.json

Each subcommand is a function registered in :func:`build_parser`; ``main`` returns the
exit code: 0 certified (with ``--only``: the selected contracts passed, not a
certification), 1 a required contract failed, 2 a usage error or a store refused
because it holds checkpoints certification did not write, 3 not certified because
required contracts could not be checked.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_CHECKABLE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT


class _UsageError(Exception):
    """A mistake in the command line or the named factory: exit 2 with the message."""


def _progress(stream: TextIO) -> object:
    from .certify import ContractResult

    def report(event: str, contract: str, result: ContractResult | None) -> None:
        if event == "start":
            stream.write(f"  {contract:<27} … ")
            stream.flush()
        elif result is not None:
            stream.write(f"{result.outcome.value} ({result.seconds:.1f}s)\n")
        else:
            stream.write("done\n")
        stream.flush()

    return report


def _certify(args: argparse.Namespace) -> int:
    from .certify import CONTRACTS, FactoryError, StoreFactory, StoreNotEmptyError, certify
    from .certify.factory import import_from_cwd
    from .certify.report import to_json, to_markdown, to_text
    from .certify.runner import MAX_TIMEOUT

    # Checked before the run: a report that cannot be written is known now, not after it.
    for option, path in (("--json", args.json), ("--markdown", args.markdown)):
        if path:
            _check_output(option, Path(path))
    known = {c.id for c in CONTRACTS}
    only = [name.strip() for name in (args.only or "").split(",") if name.strip()]
    unknown = sorted(set(only) - known)
    if unknown:
        raise _UsageError(f"--only: unknown contracts {unknown}; choose from {', '.join(sorted(known))}")
    if args.timeout is not None and not 0 < args.timeout <= MAX_TIMEOUT:
        raise _UsageError(
            f"--timeout {args.timeout:g}: give a positive number of seconds, at most {MAX_TIMEOUT:g} (a day)"
        )
    if args.only is not None and not only:
        raise _UsageError(
            f"--only {args.only!r} names no contract: give comma-separated ids from "
            f"{', '.join(sorted(known))}, or leave --only out to run them all"
        )
    import_from_cwd()
    try:
        factory = StoreFactory.from_spec(args.factory)
    except FactoryError as exc:
        raise _UsageError(str(exc)) from None
    except Exception as exc:  # the module raised while it was imported
        raise _UsageError(
            f"importing {args.factory} failed: {type(exc).__name__}: {exc}"
        ) from None
    print(
        f"certifying {args.factory}{' (quick)' if args.quick else ''}"
        + (f", seed {args.seed}" if args.seed is not None else "")
        + (" on a scratch store" if args.scratch else ""),
        file=sys.stderr,
    )
    try:
        # The run checks the store before it writes anything: a factory that fails or a
        # store holding someone's checkpoints stops it here, with nothing touched.
        # Warnings (a Redis without AOF) come once each, after the progress lines.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = certify(
                factory,
                quick=args.quick,
                seed=args.seed,
                only=only or None,
                figures=not args.no_figures,
                progress=_progress(sys.stderr),  # type: ignore[arg-type]
                scratch=args.scratch,
                timeout=args.timeout,
            )
    except (FactoryError, StoreNotEmptyError) as exc:
        raise _UsageError(str(exc)) from None
    # One line per kind of warning: every namespace's store gives the same one.
    first: dict[tuple[type[Warning], str, int], str] = {}
    for w in caught:
        first.setdefault((w.category, w.filename, w.lineno), str(w.message))
    for message in first.values():
        print(f"warning: {message}", file=sys.stderr)
    print(to_text(report, strict=args.strict))
    outputs: list[tuple[str, str | None, Callable[[], str]]] = [
        ("--json", args.json, lambda: to_json(report, strict=args.strict) + "\n"),
        ("--markdown", args.markdown, lambda: to_markdown(report, strict=args.strict)),
    ]
    for option, path, render in outputs:
        if path:
            try:
                Path(path).write_text(render(), encoding="utf-8")
            except OSError as exc:
                raise _UsageError(
                    f"{option} {path}: cannot write the report ({exc.strerror or exc}); the "
                    "report above is complete"
                ) from None
    return report.exit_code(strict=args.strict)


def _check_output(option: str, path: Path) -> None:
    """A report path that can be written: not a directory, in a directory that exists."""
    if path.is_dir():
        raise _UsageError(f"{option} {path}: that is a directory; give a file name")
    parent = path.parent
    if not parent.is_dir():
        raise _UsageError(f"{option} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise _UsageError(f"{option} {path}: not writable")


def build_parser() -> argparse.ArgumentParser:
    """The parser with every subcommand (add new ones here)."""
    parser = argparse.ArgumentParser(
        prog="agentckpt",
        description="Tools for checkpointed LLM agents: certify a checkpoint store.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    certify = commands.add_parser(
        "certify",
        help="run the contract suite against a checkpoint store",
        description=(
            "Run the contract suite against stores made by MODULE:FACTORY. FACTORY returns a "
            "fresh CheckpointStore; if it takes one argument (a namespace string), instances "
            "with the same namespace must share data and different namespaces must not "
            "collide. Certification works in namespaces of its own, deletes only what it "
            "wrote, and refuses a store that already holds checkpoints it did not write "
            "(unless --scratch). Exit status: 0 certified (every required contract checked "
            "and passed), 1 a required contract failed, 2 usage error or store refused, 3 not "
            "certified: required contracts could not be checked (the report says which hooks "
            "or setup they need). With --only, 0 means the selected contracts passed, which is "
            "not a certification: the verdict says PASSED, NOT a certification, and names the "
            "required contracts not run."
        ),
        epilog=(
            "examples:\n"
            "  agentckpt certify pytest_agentckpt.certify.builtin:sqlite --quick\n"
            "  agentckpt certify mypackage.stores:make_store --json report.json\n"
            "  agentckpt certify mypackage.stores:make_store --only round_trip --seed 42"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    certify.add_argument("factory", metavar="MODULE:FACTORY", help="the store factory to certify")
    certify.add_argument("--json", metavar="PATH", help="write the report as JSON to PATH")
    certify.add_argument("--markdown", metavar="PATH", help="write the report as Markdown to PATH")
    certify.add_argument("--quick", action="store_true",
                         help="fewer examples, rounds and repeats: seconds instead of a minute")
    certify.add_argument("--seed", type=int, metavar="N",
                         help="seed for Hypothesis and the kill timing (printed in every report)")
    certify.add_argument("--only", metavar="IDS",
                         help="comma-separated contract ids to run (default: all)")
    certify.add_argument("--strict", action="store_true",
                         help="hold the optional contracts the store declares to the same rule "
                              "(exit 1 if one fails, 3 if one is not checkable)")
    certify.add_argument("--scratch", action="store_true",
                         help="the store is scratch: run even if it holds checkpoints "
                              "certification did not write (it still deletes only its own)")
    certify.add_argument("--timeout", type=float, metavar="SECONDS",
                         help="time limit for each contract, and for the factory's first store "
                              "and its first listing (default 180, 60 with --quick); raise it "
                              "for a slow store")
    certify.add_argument("--no-figures", action="store_true", help="skip the latency figures")
    certify.set_defaults(handler=_certify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentckpt`` console script; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 for --help
        return int(exc.code or 0)
    try:
        return int(args.handler(args))
    except _UsageError as exc:
        print(f"agentckpt {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        # The run stops the check under way at its next step, waits for it, then deletes
        # what it wrote (its finally). A check that did not stop in time may have written
        # after that: say so, with the prefix of what it wrote.
        if getattr(exc, "still_running", False) or not getattr(exc, "cleaned", True):
            why = ("the check under way did not stop in time" if getattr(exc, "still_running", False)
                   else "its clean-up did not finish")
            done = (f"{why}, so tasks whose id starts with "
                    f"{getattr(exc, 'run_id', 'certify-')}- may remain; delete them, or leave "
                    "them: later runs accept them and leave them alone")
        else:
            done = "it deleted what it wrote"
        print(f"\nagentckpt {args.command}: interrupted (Ctrl-C): stopped without a verdict; "
              f"{done}", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
