"""Revisions: which run a ref names, read through the storage port.

A revision is what every verb that takes a run accepts, as git's do: a run id, a branch
name, ``HEAD``, ``@`` or ``main`` (the thread's newest run), a unique prefix of a run id, or a
short content hash (at least 4 hex digits of ``Run.hash``, unique in the thread: git's
abbreviated hashes), each optionally followed by ``~n`` (the n-th lineage ancestor) and
``^`` (the parent), chained (``HEAD~1^``). A whole run id names its run whatever it holds;
else the longest name before a chain of steps that is a run id or branch is the base (the
run ``r~2`` makes ``r~2~1`` its parent), else the name before the first step. Without a
thread, a name must be unique in the store: a run id that is also another thread's branch
name, or a run id of several threads, is ambiguous and says which ``thread_id`` to pass. An
ambiguous prefix lists the runs it fits.

With a ``scope`` (an owner's name), only that owner's threads are searched: another owner's
thread is absent, not forbidden (docs/design/behaviour.md#live-recording). Written once, over
:class:`agui_store.engine.port.Reading`, so every backend resolves alike.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass

from agui_store.engine import arguments, clock, port, tombstones
from agui_store.errors import (
    AmbiguousRunError,
    ArgumentTypeError,
    InvalidArgumentError,
    RunNotFoundError,
)

#: The implicit branch of every thread: it follows the thread's newest run.
DEFAULT_BRANCH = "main"
#: Names that are never a stored branch: they name the thread's newest run.
RESERVED_REFS = frozenset({DEFAULT_BRANCH, "HEAD"})
#: Ids no new run takes: each names the thread's newest run where a revision is read.
NEWEST_NAMES = RESERVED_REFS | {arguments.HEAD_ALIAS}


@dataclass(frozen=True)
class RunKey:
    """A run as the store's keys name it: its own and its thread's."""

    pk: int
    thread_pk: int


def thread_row(tx: port.Reading, thread_id: str) -> tuple[int, str | None]:
    """A thread's ``(pk, owner)``, ``(0, None)`` for a missing one."""
    if not (isinstance(thread_id, str) and arguments.storable_text(thread_id)):
        return 0, None  # no stored thread id holds a lone surrogate (nor is not text)
    return tx.thread(thread_id) or (0, None)


def require_thread(tx: port.Reading, thread_id: str, scope: str | None, where: str) -> int:
    """A thread's pk; a thread of another owner than ``scope`` is absent
    (docs/design/behaviour.md#live-recording).
    ``where`` names the store in the error; an id that is not text is a wrong argument, not
    an absent thread. An absent thread the store erased is said to be, and when, so that a
    request for a thread the store forgot is told so; not with a ``scope``: a tombstone
    names no owner, and another owner's erased thread is as absent as their live one."""
    if not isinstance(thread_id, str):
        raise ArgumentTypeError(
            f"a thread id is text, not {arguments.a_kind(thread_id)}"
            + ("" if thread_id is None else f" ({thread_id!r:.60})")
        )
    pk, owner = thread_row(tx, thread_id)
    if not pk or (scope is not None and owner != scope):
        absent = f"no thread {arguments.quote(thread_id)} in {where}"
        erased_at = tombstones.thread_erased_at(tx, thread_id) if scope is None else None
        if erased_at is not None:
            absent += f": it was erased at {clock.shown(erased_at)}"
        raise RunNotFoundError(absent)
    return pk


def owned_threads(tx: port.Reading, scope: str | None) -> list[int | None]:
    """The threads a scope may touch: ``[None]`` (all of them) for the operator."""
    if scope is None:
        return [None]
    return list(tx.owned_thread_pks(scope))


def resolve(
    tx: port.Reading,
    ref: str,
    *,
    where: str,
    thread_id: str | None = None,
    thread_pk: int | None = None,
    scope: str | None = None,
) -> RunKey:
    """The run a revision names. With a ``scope``, only that owner's threads are searched
    (``thread_pk`` is then one of them).

    Raises:
        RunNotFoundError: nothing by that name, or no ancestor that far back.
        AmbiguousRunError: the name fits several runs; the message says what to pass.
    """
    quote = arguments.quote
    arguments.check_scope(scope)
    if not isinstance(ref, str):
        raise ArgumentTypeError(
            f"a run id or ref is text, not {arguments.a_kind(ref)}"
            + ("" if ref is None else f" ({ref!r:.60})")
        )
    if not ref:
        raise RunNotFoundError("not a run id or ref: ''")
    if not arguments.storable_text(ref):
        raise RunNotFoundError(
            f"no run, branch or ref {quote(ref)}: it holds a lone surrogate, which no "
            "stored id can"
        )
    if thread_pk is None and thread_id is not None:
        thread_pk = require_thread(tx, thread_id, scope, where)
    try:
        return _resolve_exact(tx, ref, thread_pk, scope)
    except RunNotFoundError:
        ancestor = arguments.split_ancestor(ref)
        if ancestor is None:
            raise
    base, steps = ancestor
    key = None
    for longer, more in arguments.longer_bases(ref):  # a run r~2, as r~2~1 names its parent
        try:
            key = _resolve_exact(tx, longer, thread_pk, scope, abbreviations=False)
        except RunNotFoundError:
            continue
        base, steps = longer, more
        break
    if key is None:
        key = _resolve_exact(tx, base, thread_pk, scope)
    for _ in range(steps):
        parent = tx.run_parent(key.pk)
        if parent is None:
            raise RunNotFoundError(f"{quote(ref)}: the lineage has no ancestor that far back")
        key = RunKey(parent, key.thread_pk)
    return key


def resolve_pair(
    tx: port.Reading, a: str, b: str, *, where: str, thread_id: str | None, scope: str | None
) -> tuple[RunKey, RunKey]:
    """Two revisions resolved, ``b`` in the thread ``a`` was found in when ``thread_id``
    names one (what the verbs comparing two runs take)."""
    ka = resolve(tx, a, where=where, thread_id=thread_id, scope=scope)
    in_thread = ka.thread_pk if thread_id is not None else None
    return ka, resolve(tx, b, where=where, thread_id=thread_id, thread_pk=in_thread, scope=scope)


def threads_to_derive(
    tx: port.Reading, thread_id: str | None, scope: str | None, where: str
) -> list[int | None]:
    """The threads ``derive`` covers: ``thread_id`` alone (a thread of ``scope``), or every
    thread ``scope`` may touch."""
    arguments.check_scope(scope)
    if thread_id:
        return [require_thread(tx, thread_id, scope, where)]
    return owned_threads(tx, scope)


def threads_to_rebuild(
    tx: port.Reading, thread_id: str | None, scope: str | None, where: str
) -> list[int]:
    """The threads ``rebuild`` covers: ``thread_id`` alone (a thread of ``scope``), or every
    thread ``scope`` may touch, oldest first."""
    arguments.check_scope(scope)
    if thread_id is not None:
        return [require_thread(tx, thread_id, scope, where)]
    return tx.thread_pks(None, sys.maxsize) if scope is None else tx.owned_thread_pks(scope)


def runs_to_compact(
    tx: port.Reading, ref: str | None, thread_id: str | None, scope: str | None, where: str
) -> tuple[list[int | None], list[int]]:
    """What ``compact`` covers (:func:`selection`): the run ``ref`` names and its ancestors,
    the thread ``thread_id``, or every thread ``scope`` may touch."""
    arguments.check_scope(scope)
    key = thread_pk = None
    if ref is not None:
        key = resolve(tx, ref, where=where, thread_id=thread_id, scope=scope)
    elif thread_id is not None:
        thread_pk = require_thread(tx, thread_id, scope, where)
    return selection(tx, key, thread_pk, scope)


def new_run_id(tx: port.Reading, key: RunKey, run_id: str | None) -> str:
    """The id of a run to start from run ``key`` (``fork``): ``run_id``, which must be new
    in the thread (append would refuse the body later, far from the mistake), or a fresh
    UUID.

    Raises:
        InvalidArgumentError: ``run_id`` is not an id (or one no backend can store), is a
            run of the thread already, or names one of its branches.
    """
    quote = arguments.quote
    if run_id is None:
        return str(uuid.uuid4())
    if not (isinstance(run_id, str) and run_id):
        raise InvalidArgumentError(f"run_id= must be a non-empty id, not {quote(run_id)}")
    reason = arguments.unstorable(run_id)  # what append refuses in the body's runId
    if reason is not None:
        raise InvalidArgumentError(f"run_id= {quote(run_id)} {reason}")
    if run_id in NEWEST_NAMES:
        raise InvalidArgumentError(
            f"run_id= {quote(run_id)} names every thread's newest run (HEAD, @ and main): "
            "a new run needs another id"
        )
    if tx.run_pk(key.thread_pk, run_id) is not None:
        raise InvalidArgumentError(
            f"run_id= {quote(run_id)} is already a run of thread "
            f"{quote(tx.thread_id(key.thread_pk))}: a new run needs a new id"
        )
    if tx.branch_run(key.thread_pk, run_id) is not None:  # append refuses it, as a revision
        raise InvalidArgumentError(
            f"run_id= {quote(run_id)} is the name of a branch of thread "
            f"{quote(tx.thread_id(key.thread_pk))}, which a run of that id would shadow as a "
            "revision: a new run needs another id"
        )
    return run_id


def _resolve_exact(
    tx: port.Reading, ref: str, thread_pk: int | None, scope: str | None,
    *, abbreviations: bool = True,
) -> RunKey:
    """The run ``ref`` names without ancestor steps: a run id, a branch, a name of the
    newest run, then (with ``abbreviations``) a unique prefix of a run id or short hash."""
    quote = arguments.quote
    # Within one thread, the scope was checked when it was found.
    owner = scope if thread_pk is None else None
    runs = tx.runs_named(ref, thread_pk, owner)
    if len(runs) == 1:
        pk, run_thread_pk, run_thread_id, branch_thread_id = runs[0]
        # The same name as a branch of another thread (within a thread, append and branch
        # refuse the clash): the caller must say which thread.
        if branch_thread_id is not None:
            raise AmbiguousRunError(
                f"{quote(ref)} is a run of thread {quote(run_thread_id)} and a branch of "
                f"thread {quote(branch_thread_id)}: pass thread_id="
            )
        return RunKey(pk, run_thread_pk)
    if len(runs) > 1:
        threads = ", ".join(quote(r[2]) for r in runs)
        raise AmbiguousRunError(
            f"run id {quote(ref)} exists in several threads ({threads}): pass thread_id="
        )
    tips = tx.branches_named(ref, thread_pk, owner)
    if len(tips) == 1:
        return RunKey(*tips[0])
    if len(tips) > 1:
        raise AmbiguousRunError(
            f"branch {quote(ref)} exists in several threads: pass thread_id="
        )
    if ref in RESERVED_REFS or ref == arguments.HEAD_ALIAS:
        if thread_pk is None:
            thread_pk = _only_thread(tx, scope)
            if thread_pk is None:
                pks = tx.thread_pks(scope, 2)
                raise AmbiguousRunError(
                    f"{ref} needs a thread: the store has no threads"
                    if not pks
                    else f"{ref} needs a thread: the store has several; pass thread_id="
                )
        newest = tx.newest_run(thread_pk)
        if newest is None:
            raise RunNotFoundError(f"{ref}: the thread has no runs")
        return RunKey(newest, thread_pk)
    if not abbreviations:
        raise RunNotFoundError(f"no run or branch {quote(ref)}")
    # Abbreviations: a unique prefix of a run id, or of a run's content hash (within the
    # thread, as git's short hashes are unique within a repository).
    found: dict[int, tuple[int, str, str]] = {}  # pk: (thread pk, run id, what matched)
    for pk, run_thread_pk, run_id in tx.runs_prefixed(
        ref, arguments.prefix_bound(ref), thread_pk, owner
    ):
        found[pk] = (run_thread_pk, run_id, "run id")
    hashed_in = thread_pk if thread_pk is not None else _only_thread(tx, scope)
    # A run still open shows its hash so far with a "+" after it (as log prints it).
    if hashed_in is not None:
        for row, hex_hash in runs_hashed(tx, hashed_in, ref[:-1] if ref.endswith("+") else ref):
            found.setdefault(row.pk, (hashed_in, row.run_id, f"hash {hex_hash[:12]}"))
    if len(found) == 1:
        (pk, (run_thread_pk, _, _)), = found.items()
        return RunKey(pk, run_thread_pk)
    if len(found) > 1:
        shown = [f"{quote(run_id, 40)} ({what})" for run_id, what in
                 ((v[1], v[2]) for v in list(found.values())[:6])]
        more = ", ..." if len(found) > 6 else ""
        count = "more than 6" if len(found) > 6 else str(len(found))
        raise AmbiguousRunError(
            f"{quote(ref)} is ambiguous: it begins {count} runs' ids or hashes: "
            f"{', '.join(shown)}{more}; give more characters"
        )
    raise RunNotFoundError(
        f"no run, branch, unique run-id prefix or short hash {quote(ref)}"
        + _elsewhere(tx, ref, thread_pk, scope)
    )


def _elsewhere(tx: port.Reading, ref: str, thread_pk: int | None, scope: str | None) -> str:
    """Where a name was looked for, when a thread was given, and the threads (of the
    scope's) that do hold a run of that id: the thread given was the mistake."""
    if thread_pk is None:
        return ""
    others = sorted(thread_id for _, _, thread_id, _ in tx.runs_named(ref, None, scope))
    said = f" in thread {arguments.quote(tx.thread_id(thread_pk))}"
    if not others:
        return said
    threads = ", ".join(arguments.quote(t) for t in others)
    return f"{said} (a run of thread {threads} has that id)" if len(others) == 1 else (
        f"{said} (runs of threads {threads} have that id)")


def runs_hashed(
    tx: port.Reading, thread_pk: int, digits: str
) -> list[tuple[port.RunSummary, str]]:
    """The thread's runs whose content hash begins with ``digits``, a short hash, each with
    its hash in hex (none if ``digits`` cannot be one: :func:`arguments.is_short_hash`)."""
    if not arguments.is_short_hash(digits):
        return []
    hashed = [(row, bytes(row.hash).hex()) for row in tx.thread_run_summaries(thread_pk)
              if row.hash is not None]
    return [(row, hex_hash) for row, hex_hash in hashed if hex_hash.startswith(digits.lower())]


def runs_begun_by(tx: port.Reading, thread_pk: int, name: str) -> list[str]:
    """The ids of the thread's runs that ``name`` begins, itself aside, at most seven (sorted): the
    runs a branch so named hides from that prefix, since a branch resolves before an
    abbreviation (git warns of a refname that is also an object's abbreviation)."""
    if not (isinstance(name, str) and name and arguments.storable_text(name)):
        return []
    bound = arguments.prefix_bound(name)
    return sorted(run_id for _, _, run_id in tx.runs_prefixed(name, bound, thread_pk, None)
                  if run_id != name)


def _only_thread(tx: port.Reading, scope: str | None) -> int | None:
    """The store's (or the scope's) thread when it holds exactly one, else ``None``."""
    pks = tx.thread_pks(scope, 2)
    return pks[0] if len(pks) == 1 else None


def selection(
    tx: port.Reading, run: RunKey | None, thread_pk: int | None, scope: str | None
) -> tuple[list[int | None], list[int]]:
    """What a verb that works on a run and its ancestors, a thread, or the whole store (a
    scope's threads, with one) covers: ``(threads, run pks)``, threads ``[None]`` for all."""
    if run is not None:
        return [run.thread_pk], tx.ancestors(run.pk)
    if thread_pk is not None:
        return [thread_pk], tx.thread_run_pks(thread_pk)
    if scope is not None:
        return owned_threads(tx, scope), tx.owner_run_pks(scope)
    return [None], tx.all_run_pks()
