"""``Store``'s verbs over a thread's lineage: branches, forks, and comparing two runs.

Branches are the engine's :mod:`agui_store.engine.branches`; comparisons (the merge base,
ancestry, the diff) are :mod:`agui_store.engine.comparison`; refs resolve through
:mod:`agui_store.engine.revisions`.
"""

from __future__ import annotations

from typing import Any

from agui_store.engine import arguments, branches, comparison, intake, port, reads, revisions
from agui_store.engine.revisions import RunKey
from agui_store.errors import InvalidArgumentError
from agui_store.facade.base import Facade
from agui_store.history.diff import Diff
from agui_store.records import Branch, Run

__all__ = ["LineageVerbs"]


class LineageVerbs(Facade):
    """``Store``'s verbs over lineage: :meth:`branch`, :meth:`branches`,
    :meth:`delete_branch`, :meth:`rename_branch`, :meth:`fork`, and :meth:`merge_base`,
    :meth:`is_ancestor` and :meth:`diff` to compare two runs."""

    def branch(
        self,
        name: str,
        run_id: str,
        *,
        thread_id: str | None = None,
        scope: str | None = None,
        move: bool = True,
    ) -> Branch:
        """Point branch ``name`` at a run (creating or moving it). With a ``scope``, only a
        run of that owner's threads (another owner's are absent: ``RunNotFoundError``).
        ``move=False`` refuses to move a branch that exists (``BranchError``), as git's
        ``branch`` does without ``--force``."""
        arguments.flag("move", move)
        intake.check_branch_name(name)  # before the run, as git names a bad name first
        with self.writing() as tx:
            key = self._resolve(tx, run_id, thread_id=thread_id, scope=scope)
            return branches.point(tx, name, key, move=move)

    def branches(self, thread_id: str, *, scope: str | None = None) -> list[Branch]:
        """A thread's branches: the default one (following the newest run) first."""
        arguments.check_scope(scope)
        with self.reading() as tx:
            return branches.listing(tx, self._require_thread(tx, thread_id, scope), thread_id)

    def delete_branch(self, name: str, *, thread_id: str, scope: str | None = None) -> None:
        """Delete a branch (the runs stay; only the name goes).

        Raises:
            BranchError: no branch ``name`` in the thread, or ``name`` is ``main``, ``HEAD``
                or ``@`` (which follow the newest run and are never deleted).
            ArgumentTypeError: ``name`` is not text (a ``TypeError`` too).
            RunNotFoundError: no thread ``thread_id`` (in the ``scope``).
        """
        branches.refuse_reserved(name)
        arguments.check_scope(scope)
        with self.writing() as tx:
            branches.delete(tx, self._require_thread(tx, thread_id, scope), thread_id, name)

    def rename_branch(
        self,
        old: str,
        new: str,
        *,
        thread_id: str,
        force: bool = False,
        scope: str | None = None,
    ) -> Branch:
        """Rename a branch (its run and ``updated_at``, when it last moved, stay), as ``git
        branch -m`` does. ``force`` replaces a branch already named ``new``.

        Raises:
            BranchError: no branch ``old`` in the thread, ``old`` is ``main``, ``HEAD`` or
                ``@``, ``new`` is not a valid name, or a branch named ``new`` exists and
                ``force`` is false.
            ArgumentTypeError: ``old`` or ``new`` is not text (a ``TypeError`` too).
            RunNotFoundError: no thread ``thread_id`` (in the ``scope``).
        """
        branches.refuse_reserved(old)
        intake.check_scope(scope)
        arguments.flag("force", force)
        with self.writing() as tx:
            pk = self._require_thread(tx, thread_id, scope)
            return branches.rename(tx, pk, thread_id, old, new, force=force)

    def fork(
        self,
        run_or_ref: str,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        scope: str | None = None,
    ) -> dict[str, Any]:
        """The ``RunAgentInput`` a client sends to start a new run from this one.

        Tools, context and forwarded props come from the newest recorded input in the
        run's lineage (a client resends the same ones); messages and state are the view.

        Raises:
            InvalidArgumentError: ``run_id`` is already a run of the thread (append would
                refuse the body).
        """
        with self.reading() as tx:
            key = self._resolve(tx, run_or_ref, thread_id=thread_id, scope=scope)
            return reads.fork_input(tx, key.pk, revisions.new_run_id(tx, key, run_id))

    def _pair(
        self, tx: port.Reading, a: str, b: str, thread_id: str | None, scope: str | None
    ) -> tuple[RunKey, RunKey]:
        return revisions.resolve_pair(tx, a, b, where=self.path, thread_id=thread_id, scope=scope)

    def merge_base(
        self, a: str, b: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> Run | None:
        """The nearest run both ``a`` and ``b`` descend from (either may be it), or ``None``."""
        with self.reading() as tx:
            return comparison.merge_base(tx, *self._pair(tx, a, b, thread_id, scope))

    def is_ancestor(
        self, a: str, b: str, *, thread_id: str | None = None, scope: str | None = None
    ) -> bool:
        """Whether ``a`` is on ``b``'s lineage (a run is its own ancestor, as in git)."""
        with self.reading() as tx:
            return comparison.is_ancestor(tx, *self._pair(tx, a, b, thread_id, scope))

    def diff(
        self,
        a: str,
        b: str,
        *,
        thread_id: str | None = None,
        mode: str = "three-dot",
        scope: str | None = None,
    ) -> Diff:
        """Compare two runs: merge base, the runs on each side since it, message changes by
        id and the state change as an RFC 6902 patch.

        What it reads follows what the two runs changed, not the thread's length (see
        :func:`agui_store.engine.comparison.diff`).

        Args:
            mode: ``"three-dot"`` (default): what each side changed since the merge base, git
                and Dolt style; ``changes`` is base -> b and ``a_changes`` base -> a.
                ``"two-dot"``: the two views compared directly (``changes`` is a -> b).
        """
        if mode not in comparison.MODES:
            raise InvalidArgumentError(
                f"mode must be 'three-dot' or 'two-dot', not {arguments.quote(mode)}"
            )
        with self.reading() as tx:
            ka, kb = self._pair(tx, a, b, thread_id, scope)
            return comparison.diff(tx, ka, kb, mode)
