"""Task-id fidelity: the required ``task_id_fidelity`` contract.

Every task id a store is given must name its own checkpoint. A store whose key mapping
merges distinct ids (a case-insensitive collation, a column that trims trailing spaces,
truncates long ids or cannot hold a 4-byte character, a file name that replaces ``/``
with ``_``, Unicode normalisation, a path that normalises ``..``) makes one task resume
another task's checkpoint: data lost, or leaked from one task into another.

The check saves a checkpoint under each id of :data:`ID_GROUPS` (ids that differ only in
one such way), each with its own content, loads every one back and compares it exactly,
checks that the listing shows each id once, spelled as given, then deletes them one by
one and checks after each delete that the others are untouched.

Every id starts with one of the run's task ids (``certify-<10 hex>-ids-N-``), so it stays
inside the run's own ids whatever the store does with the rest: no id is a path that
normalises to anything outside that prefix (``x/../y`` resolves to ``y`` beside it).
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any

from stores import Checkpoint, CheckpointStore, ConflictError, StoreUnavailableError

from .comparison import first_difference
from .context import CertifyContext, ContractFailed

__all__ = ["ID_GROUPS", "LONG_TASK_ID", "IdGroup", "check_task_id_fidelity", "fidelity_task_ids"]

#: The length, in characters, of the two long ids (letters, digits and ``-``), which
#: differ only in their last character. A store must keep ids of this length whole; one
#: with a limit must refuse longer ids with an error, never cut them.
LONG_TASK_ID = 200

#: The length of the two longer ids, past the common key limits (255, 512, 767, 1,024):
#: a store may refuse them with an error, but one that saves them must keep them apart.
LONGER_TASK_ID = 1100

#: The metadata key that says which id of the run a checkpoint was saved under.
_MARKER = "certify_task_id_probe"

#: What the store must do instead; part of every failure's summary.
ADVICE = (
    "A store must keep every task id exactly as given: compare ids as bytes or code "
    "points (a binary NO PAD collation: utf8mb4_0900_bin in MySQL 8, utf8mb4_nopad_bin "
    "in MariaDB, or a VARBINARY column, since utf8mb4_bin ignores trailing spaces; "
    'COLLATE "C" in PostgreSQL; a case-sensitive file system), store them whole (a key '
    "column wide enough, utf8mb4 rather than 3-byte utf8) and map them to keys or file "
    "names injectively (percent-encode every byte outside [A-Za-z0-9-]; never lowercase, "
    "trim, truncate, replace or Unicode-normalise), or key by a hash of the id (SHA-256) "
    "and store the id itself beside it, checked on load; and delete by the exact key, never "
    "by a pattern (SQL LIKE, a glob, Redis SCAN MATCH) unless its wildcards are escaped"
)


#: For a deleted id still listed with its own data, when no other id is involved.
_DELETED_LISTED_ADVICE = (
    "No other id is involved: the task's own delete left it in the listing (a tombstone, "
    "a row marked deleted, or an index entry the listing does not filter out); "
    "list_checkpoints must show only the tasks load returns; see the delete_idempotent "
    "contract"
)

#: For a delete that left the id's own data behind, when no other id is involved.
_DELETE_ADVICE = (
    "No other id is involved: delete must remove everything a task stored (its head and "
    "its messages, every key or row of it), so that load returns None afterwards; see the "
    "delete_idempotent contract. (If that contract passes, the store deletes differently "
    "for an id like this one: by a pattern, or under a key mapped another way than save's)"
)


@dataclass(frozen=True)
class IdGroup:
    """Suffixes of ids that differ only in one way a store may merge ids."""

    name: str
    how: str
    suffixes: tuple[str, ...]


ID_GROUPS: tuple[IdGroup, ...] = (
    IdGroup("case", "differ only in letter case", ("report", "Report", "REPORT")),
    IdGroup("fold", "differ only in 'ß' against 'ss', equal under case folding and in many "
            "collations", ("strasse", "stra\u00dfe")),
    # The id without the space comes first: deleted first, a delete by prefix shows.
    IdGroup("space", "differ only in a trailing space or tab, or a space after '-', equal "
            "once trimmed or under a PAD SPACE collation", ("pad", "pad ", "pad\t", " pad")),
    IdGroup("accent", "differ only in 'é', composed (NFC), decomposed (NFD) or without the "
            "accent, equal once normalised or under an accent-insensitive collation",
            ("cafe", unicodedata.normalize("NFC", "caf\u00e9"), unicodedata.normalize("NFD", "caf\u00e9"))),
    IdGroup("compat", "differ only in the ligature 'ﬁ' against 'fi', equal under NFKC",
            ("file", "\ufb01le")),
    # 'a_b' first: a delete that matches with SQL LIKE ('_' is a wildcard) removes 'a/b'.
    IdGroup("sep", "differ only in the separator '_', '/', '\\', ':' or an escaped '%2F', "
            "equal once sanitised into a file name or key",
            ("a_b", "a/b", "a\\b", "a:b", "a%2Fb")),
    IdGroup("path", "differ only in '.', '..' or empty path segments or a trailing '/', "
            "equal once normalised as a path",
            ("dir/y", "dir/./y", "dir/x/../y", "dir//y", "dir/y/")),
    IdGroup("dot", "differ only in trailing dots, which Windows file names drop",
            ("end", "end.", "end..")),
    # Wildcards first: a delete by glob or LIKE pattern removes the plain ids after them.
    IdGroup("wild", "differ only in a character that is a wildcard in glob or SQL LIKE "
            "patterns", ("*", "%", "?", "[ab]", "a", "b")),
    IdGroup("astral", "differ only in a character outside the Basic Multilingual Plane, "
            "4 bytes in UTF-8 that a 3-byte utf8 column cannot hold, or in what a lossy "
            "conversion makes of it: '?' or nothing",
            ("\U0001f600", "\U0001f601", "?", "", "\U00020000")),
    IdGroup("long", f"are {LONG_TASK_ID} characters long and differ only in the last one, "
            f"equal in a key that keeps fewer characters", ("a", "b")),
    IdGroup("longer", f"are {LONGER_TASK_ID} characters long and differ only in the last one, "
            "equal in a key that keeps fewer characters (a store may refuse ids this long "
            "with an error, never cut them)", ("a", "b")),
)

#: The groups whose ids a store may refuse with an error (a limit above LONG_TASK_ID).
_MAY_REFUSE = frozenset({"longer"})


def fidelity_task_ids(base: str) -> list[tuple[str, IdGroup]]:
    """The ids the contract saves under ``base`` (one of the run's task ids), in order.

    >>> ids = fidelity_task_ids("certify-0123456789-ids-0")
    >>> ids[0][0], ids[1][0]
    ('certify-0123456789-ids-0-case-report', 'certify-0123456789-ids-0-case-Report')
    >>> sorted({len(task_id) for task_id, group in ids if group.name.startswith("long")})
    [200, 1100]
    """
    ids: list[tuple[str, IdGroup]] = []
    for group in ID_GROUPS:
        head = f"{base}-{group.name}-"
        for suffix in group.suffixes:
            if group.name in ("long", "longer"):
                length = LONG_TASK_ID if group.name == "long" else LONGER_TASK_ID
                fill = length - len(head) - len(suffix)
                if fill < 1:
                    raise ValueError(f"the base {base!r} leaves no room for a {length}-character id")
                ids.append((head + "x" * fill + suffix, group))
            else:
                ids.append((head + suffix, group))
    return ids


def _show(task_id: str) -> str:
    """``task_id`` unambiguously (escapes, so that NFC and NFD differ), long ones cut."""
    if len(task_id) <= 80:
        return ascii(task_id)
    return f"{ascii(task_id[:36])[:-1]}…{ascii(task_id[-12:])[1:]} ({len(task_id)} characters)"


class _Probe:
    """The ids of one run of the contract and what each was saved with."""

    def __init__(self, ctx: CertifyContext, store: CheckpointStore) -> None:
        self.ctx = ctx
        self.store = store
        self.base = ctx.task_id("ids")
        self.ids = fidelity_task_ids(self.base)
        self.index = {task_id: i for i, (task_id, _) in enumerate(self.ids)}
        self.group = dict(self.ids)
        self.saved: dict[str, Checkpoint] = {}
        #: Ids of a group that may be refused, which the store refused with an error.
        self.refused: dict[str, str] = {}

    def checkpoint(self, task_id: str) -> Checkpoint:
        i = self.index[task_id]
        return Checkpoint(
            task_id=task_id,
            goal=f"task id probe #{i}",
            messages=[{"role": "user", "content": f"checkpoint #{i} of task {task_id!a}"}],
            metadata={_MARKER: i},
        )

    def owner(self, checkpoint: Checkpoint | None) -> str | None:
        """The id ``checkpoint``'s content was saved under (by its metadata), if one of ours."""
        return None if checkpoint is None else self.owner_of_marker(checkpoint.metadata)

    def owner_of_marker(self, metadata: dict[str, Any]) -> str | None:
        """The id a checkpoint or summary with this metadata was saved under, if ours."""
        marker = metadata.get(_MARKER)
        if type(marker) is int and 0 <= marker < len(self.ids):
            return self.ids[marker][0]
        return None

    def collided(self, a: str, b: str, what: str, details: str = "") -> ContractFailed:
        """Ids ``a`` and ``b`` were merged: ``what`` (about "the first" and "the second")
        showed it."""
        group_a, group_b = self.group.get(a), self.group.get(b)
        how = f" ({group_a.how})" if group_a is not None and group_a is group_b else ""
        return ContractFailed(
            f"task ids {_show(a)} and {_show(b)}{how} are not kept apart: {what}. Two tasks "
            "with such ids share one checkpoint: one resumes the other's state, or deletes "
            f"it (data lost, or leaked from one task into the other). {ADVICE}.",
            "\n".join([f"{_show(a)} in UTF-8: {a.encode('utf-8')!r}",
                       f"{_show(b)} in UTF-8: {b.encode('utf-8')!r}", details]).strip(),
        )

    def failed(self, task_id: str, what: str, details: str = "", *, advice: str = ADVICE) -> ContractFailed:
        """Something is wrong with ``task_id`` alone (no other id known to be involved)."""
        group = self.group.get(task_id)
        kind = f" (one of the ids that {group.how})" if group is not None and advice is ADVICE else ""
        return ContractFailed(f"task id {_show(task_id)}{kind}: {what}. {advice}.", details)

    def partner(self, task_id: str, exc: BaseException | None = None) -> str | None:
        """Which other id ``task_id`` was merged with: by the content a load finds, or by
        an id an error message names (a codec that checks the head's task id)."""
        texts = [str(exc)] if exc is not None else []
        try:
            found = self.store.load(task_id)
        except Exception as error:
            texts.append(str(error))
        else:
            owner = self.owner(found)
            if owner is not None and owner != task_id:
                return owner
            if found is not None and found.task_id != task_id:
                return found.task_id
        # Longest first: an id whose repr is inside another's is not the one named.
        for other, _ in sorted(self.ids, key=lambda pair: -len(pair[0])):
            if other != task_id and any(repr(other) in text for text in texts):
                return other
        return None

    def earlier_in_group(self, task_id: str) -> list[str]:
        group = self.group[task_id]
        return [t for t in self.saved if self.group[t] is group and t != task_id]


def check_task_id_fidelity(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    probe = _Probe(ctx, store)
    _save_all(probe)
    for task_id in probe.saved:
        ctx.check_stop()
        _expect_own(probe, task_id, "after every id was saved")
    _expect_listing(probe, list(probe.saved), "after every id was saved")
    _delete_all(probe)
    refused = (
        f" ({len(probe.refused)} of {LONGER_TASK_ID} characters refused with an error, as a "
        "store with a limit may)"
        if probe.refused
        else ""
    )
    return (
        f"{len(probe.saved)} task ids differing only in case, 'ß'/'ss', spaces, NFC/NFD, '/' "
        f"vs '_', '..' segments, wildcards, an emoji or the end of {LONG_TASK_ID} and "
        f"{LONGER_TASK_ID} characters each kept their own checkpoint: loaded exactly, listed "
        f"once as spelled and in code point order, deleted without touching the others{refused}"
    )


def _save_all(probe: _Probe) -> None:
    for task_id, _ in probe.ids:
        probe.ctx.check_stop()
        attempt = probe.checkpoint(task_id)
        try:
            saved = probe.store.save(attempt)
        except Exception as exc:
            if (
                probe.group[task_id].name in _MAY_REFUSE
                and not isinstance(exc, ConflictError)
                and probe.partner(task_id, exc) is None
            ):
                probe.refused[task_id] = f"{type(exc).__name__}: {exc}"
                continue
            if isinstance(exc, StoreUnavailableError) and probe.partner(task_id, exc) is None:
                # An outage says nothing of the id (an outside round's flaky store was told
                # to encode one): the contract is an error, as on any other contract.
                raise
            raise _save_failed(probe, task_id, exc) from None
        if saved.task_id == task_id and saved.version != 1:
            # The id is kept: the store returned the wrong version, not a wrong id.
            raise ContractFailed(
                f"save of the new task {_show(task_id)} returned version {saved.version}: save "
                "must return the checkpoint as stored, with its new version (1 for a new task), "
                "not the one it was given (version 0); the next save, from the version it "
                "returned, conflicts. See the round_trip and compare_and_set contracts"
            )
        if saved.task_id != task_id:
            raise probe.failed(
                task_id,
                f"save returned a checkpoint with task id {_show(saved.task_id)} and "
                f"version {saved.version}: it must return the id it was given, at version 1",
            )
        probe.saved[task_id] = saved


def _save_failed(probe: _Probe, task_id: str, exc: Exception) -> ContractFailed:
    """Why creating ``task_id`` failed: merged with an id saved before it, or refused."""
    error = f"{type(exc).__name__}: {exc}"
    conflict = isinstance(exc, ConflictError)
    other = probe.partner(task_id, exc)
    earlier = probe.earlier_in_group(task_id)
    if other is None and conflict and len(earlier) == 1:
        other = earlier[0]
    if other is not None:
        return probe.collided(
            other, task_id,
            "after the first was saved, creating the second (a save at version 0) raised "
            + type(exc).__name__
            + (", as if it existed already" if conflict else " naming the first"),
            error,
        )
    if conflict:
        shown = ", ".join(_show(t) for t in earlier) or "none"
        return probe.failed(
            task_id,
            "creating it (a save at version 0) raised ConflictError, as if it existed "
            f"already: the store merged it with an id saved before it (those of its group: {shown})",
            error,
        )
    return probe.failed(
        task_id,
        f"saving it raised {type(exc).__name__}. Every non-empty UTF-8 string without NUL is "
        "a valid task id: a store that cannot hold one as given must encode it",
        error,
    )


def _content(checkpoint: Checkpoint) -> dict[str, Any]:
    return checkpoint.model_dump(mode="json", exclude={"version", "updated_at"})


def _expect_own(probe: _Probe, task_id: str, when: str,
                deleted: str | None = None) -> None:
    """``task_id`` loads exactly the checkpoint saved under it (``when`` ``deleted`` was
    deleted, if given: then a checkpoint gone is that delete's doing)."""
    expected = probe.saved[task_id]
    try:
        loaded = probe.store.load(task_id)
    except Exception as exc:
        other = probe.partner(task_id, exc)
        if other is not None:
            raise probe.collided(
                other, task_id,
                f"{when}, loading the second raised {type(exc).__name__} naming the first",
                f"{type(exc).__name__}: {exc}",
            ) from None
        raise probe.failed(task_id, f"{when}, loading it raised {type(exc).__name__}",
                           f"{type(exc).__name__}: {exc}") from None
    if loaded is None and deleted is not None:
        raise probe.collided(
            deleted, task_id,
            "deleting the first removed the second too (it no longer loads)",
        )
    if loaded is None:
        raise probe.failed(
            task_id,
            f"{when}, load returned None: it was saved (version 1) under this exact id, and "
            "save and load must map the id to the same place",
        )
    owner = probe.owner(loaded)
    if owner is not None and owner != task_id:
        raise probe.collided(
            owner, task_id,
            f"{when}, loading the second returned the checkpoint saved under the first",
        )
    if type(loaded.task_id) is not str or loaded.task_id != task_id:
        raise probe.failed(
            task_id,
            f"{when}, load returned its checkpoint with the task id {_show(loaded.task_id)}: "
            "the id must come back exactly as given",
        )
    difference = first_difference(_content(expected), _content(loaded))
    if difference:
        raise probe.failed(task_id, f"{when}, the loaded checkpoint differs from the saved one",
                           difference)
    if loaded.version != expected.version:
        raise probe.failed(
            task_id, f"{when}, it was saved as version {expected.version} and loads as version "
            f"{loaded.version}",
        )


def _expect_listing(probe: _Probe, present: list[str], when: str) -> None:
    """The listing shows exactly ``present`` of this run's ids, once each, as spelled."""
    try:
        everything = probe.store.list_checkpoints()
    except Exception as exc:
        raise ContractFailed(
            f"{when}, list_checkpoints raised {type(exc).__name__}: a listing must show every "
            f"task id as it was saved. {ADVICE}.",
            f"{type(exc).__name__}: {exc}",
        ) from None
    summaries = [s for s in everything if s.task_id.startswith(probe.base + "-")]
    listed = Counter(s.task_id for s in summaries)
    for task_id, count in listed.items():
        if count > 1:
            raise probe.failed(task_id, f"{when}, the listing shows it {count} times, not once")
    for summary in summaries:
        owner = probe.owner_of_marker(summary.metadata)
        if summary.task_id in probe.index and owner is not None and owner != summary.task_id:
            raise probe.collided(
                owner, summary.task_id,
                f"{when}, the listing shows the second with the metadata saved under the first",
            )
        if summary.task_id not in probe.index or summary.task_id not in present:
            if owner is not None and owner != summary.task_id and owner in present:
                what = (f"{when}, the listing shows {_show(owner)} as {_show(summary.task_id)}: "
                        "the id must be listed exactly as it was saved")
                raise probe.failed(owner, what)
            state = "never saved" if summary.task_id not in probe.index else "deleted"
            own = state == "deleted" and owner in (None, summary.task_id)
            raise probe.failed(
                summary.task_id,
                f"{when}, the listing shows it, but it was {state} under this spelling",
                # Its own delete left it listed: no other id is involved.
                **({"advice": _DELETED_LISTED_ADVICE} if own else {}),
            )
    order = [s.task_id for s in summaries]
    if order != sorted(order):
        first = next(i for i in range(len(order) - 1) if order[i] > order[i + 1])
        raise ContractFailed(
            f"{when}, the listing is not ordered by task_id: it shows {_show(order[first])} "
            f"before {_show(order[first + 1])}, where comparing their code points (their UTF-8 "
            "bytes) puts it after. list_checkpoints orders by task_id in code point order, the "
            "order of Python's sorted() on str and of a binary collation, whatever the "
            'database\'s locale: ORDER BY task_id COLLATE "C" in PostgreSQL, a _bin collation '
            "in MySQL, or sort in Python",
        )
    missing = [task_id for task_id in present if task_id not in listed]
    if missing:
        # Every missing id sorts after the last task listed: the listing stops after a page
        # (an outside round's LIMIT 10), it does not map ids.
        paged = bool(everything) and all(task_id > everything[-1].task_id for task_id in missing)
        raise probe.failed(
            missing[0],
            f"{when}, the listing does not show it ({len(missing)} of the {len(present)} ids "
            "saved are missing); it still loads, so "
            + (
                f"the listing stops after a page of {len(everything)} tasks (a LIMIT, a single SCAN call): "
                "list every task, page by page (the listing contract checks many tasks)"
                if paged
                else "the listing maps ids differently"
            ),
        )


def _delete_all(probe: _Probe) -> None:
    """Delete the ids one by one: each delete removes its own checkpoint and nothing else."""
    remaining = list(probe.saved)
    for group in ID_GROUPS:
        in_group = [t for t in remaining if probe.group[t] is group]
        for task_id in in_group:
            probe.ctx.check_stop()
            try:
                probe.store.delete(task_id)
            except Exception as exc:
                raise probe.failed(task_id, f"deleting it raised {type(exc).__name__}: {exc}") from None
            remaining.remove(task_id)
            try:
                after = probe.store.load(task_id)
            except Exception as exc:
                if probe.partner(task_id, exc) is None:
                    # Its own delete left something behind: no other id is involved.
                    raise probe.failed(
                        task_id, f"after deleting it, loading it raised {type(exc).__name__}",
                        f"{type(exc).__name__}: {exc}", advice=_DELETE_ADVICE,
                    ) from None
                raise probe.failed(
                    task_id, f"after deleting it, loading it raised {type(exc).__name__}: {exc}"
                ) from None
            if after is not None:
                owner = probe.owner(after)
                if owner is not None and owner != task_id:
                    raise probe.collided(
                        owner, task_id,
                        "after deleting the second, loading it returns the checkpoint saved "
                        "under the first",
                    )
                raise probe.failed(task_id, "delete did not remove it: it still loads", advice=_DELETE_ADVICE)
            for other in in_group:
                if other in remaining:
                    _expect_own(probe, other, f"after deleting {_show(task_id)}",
                                deleted=task_id)
        _expect_listing(probe, remaining, f"after deleting the ids of group {group.name!r}")


