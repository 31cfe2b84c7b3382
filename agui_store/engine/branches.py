"""Branches: names that point at runs, as git's refs do, read and written through the
storage port. A thread's default branch (``main``, also ``HEAD``) is not stored: it follows
the thread's newest run."""

from __future__ import annotations

from agui_store.engine import clock, port
from agui_store.engine.arguments import a_kind, quote, unstorable_text
from agui_store.engine.intake import check_branch_name
from agui_store.engine.placement import refuse_branch_shadowing_run
from agui_store.engine.revisions import DEFAULT_BRANCH, NEWEST_NAMES, RunKey
from agui_store.errors import ArgumentTypeError, BranchError
from agui_store.records import Branch, when


def point(tx: port.Writing, name: str, run: RunKey, *, move: bool = True) -> Branch:
    """Point branch ``name`` at ``run``, creating it, or moving it when ``move`` allows. A
    branch already at ``run`` is left as it is, its ``updated_at`` too: nothing moved."""
    check_branch_name(name)
    refuse_branch_shadowing_run(tx, run.thread_pk, name)
    at = tx.branch_run(run.thread_pk, name)
    if at is not None and not move:
        raise BranchError(
            f"branch {quote(name)} already exists in thread "
            f"{quote(tx.thread_id(run.thread_pk))} (at run {quote(tx.run_id(at))}): "
            "moving it needs force"
        )
    if at == run.pk:
        updated = next(u for n, _, u in tx.branch_list(run.thread_pk) if n == name)
        return Branch(tx.thread_id(run.thread_pk), name, tx.run_id(run.pk), False, when(updated))
    now = clock.now_ms()
    tx.set_branch(run.thread_pk, name, run.pk, now)
    return Branch(tx.thread_id(run.thread_pk), name, tx.run_id(run.pk), False, when(now))


def rename(
    tx: port.Writing, thread_pk: int, thread_id: str, old: str, new: str, *, force: bool
) -> Branch:
    """Rename branch ``old`` to ``new`` (its run and its ``updated_at`` stay); ``force``
    replaces a branch already named ``new``."""
    refuse_reserved(old)
    check_branch_name(new)
    at = tx.branch_run(thread_pk, old)
    if at is None:
        raise BranchError(f"no branch {quote(old)} in thread {quote(thread_id)}")
    refuse_branch_shadowing_run(tx, thread_pk, new)
    if new != old and not force:
        taken = tx.branch_run(thread_pk, new)
        if taken is not None:
            raise BranchError(
                f"branch {quote(new)} already exists in thread {quote(thread_id)} "
                f"(at run {quote(tx.run_id(taken))}): replacing it needs force"
            )
    # The branch keeps when it last moved, as git keeps a renamed branch's reflog: a
    # rename points no name at another run, as pointing a branch where it is does not.
    updated = next(u for n, _, u in tx.branch_list(thread_pk) if n == old)
    if new != old:
        tx.set_branch(thread_pk, new, at, updated)
        tx.delete_branch(thread_pk, old)
    return Branch(thread_id, new, tx.run_id(at), False, when(updated))


def listing(tx: port.Reading, thread_pk: int, thread_id: str) -> list[Branch]:
    """A thread's branches: the default one (following the newest run) first."""
    out = []
    newest = tx.newest_run(thread_pk)
    if newest is not None:
        out.append(Branch(thread_id, DEFAULT_BRANCH, tx.run_id(newest), True))
    for name, run_id, updated in tx.branch_list(thread_pk):
        out.append(Branch(thread_id, name, run_id, False, when(updated)))
    return out


def refuse_reserved(name: str) -> None:
    """The default branch's names cannot be deleted: they are not stored. A name that is
    not text, or is text no backend stores, names no branch."""
    if not isinstance(name, str):  # a programming error (a TypeError), not a bad name
        raise ArgumentTypeError(f"a branch name is text, not {a_kind(name)} ({quote(name)})")
    reason = unstorable_text(name)  # no branch has it: said before any backend sees it
    if reason is not None:
        raise BranchError(f"branch name {quote(name)} {reason}: it names no branch")
    if name in NEWEST_NAMES:
        raise BranchError(
            f"{name!r} is the thread's default branch; it cannot be deleted or renamed"
        )


def delete(tx: port.Writing, thread_pk: int, thread_id: str, name: str) -> None:
    """Delete a branch (the runs stay; only the name goes)."""
    if not tx.delete_branch(thread_pk, name):
        raise BranchError(f"no branch {quote(name)} in thread {quote(thread_id)}")
