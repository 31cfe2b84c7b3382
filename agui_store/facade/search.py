"""``Store``'s search: messages found by their words, in every thread or one.

The query is parsed by the rules both backends share (:mod:`agui_store.history.search`) and
answered from the full-text index (:mod:`agui_store.engine.search`).
"""

from __future__ import annotations

from agui_store.engine import intake, search
from agui_store.facade.base import Facade
from agui_store.history import search as search_rules
from agui_store.records import SearchHits

__all__ = ["SearchVerbs"]


class SearchVerbs(Facade):
    """``Store``'s :meth:`search`."""

    def search(
        self,
        query: str,
        *,
        thread_id: str | None = None,
        scope: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> SearchHits:
        """Find messages by their words, newest first, in every thread (or one).

        A message is found by the text ``checkout`` restores it with: user, assistant,
        system and developer text, reasoning, tool-call names and arguments, and tool
        results; once per thread, named by the run that first recorded it. Words match
        case-insensitively with accents folded (``cafe`` finds ``Café``)::

            store.search("porto hotel")           # both words, anywhere in a message
            store.search('"porto hotel" -cancel') # the phrase, and not the word
            store.search("refund*", thread_id="t1")  # a word starting with refund

        Pages: ``limit`` hits at a time, continued by ``cursor=page.next_cursor``.

        Args:
            query: words (all must match), ``"quoted phrases"``, a trailing ``*`` for a
                prefix, ``-word`` or ``-"a phrase"`` to leave out.
            thread_id: only this thread's messages.
            scope: only that owner's threads; another owner's messages are never returned
                or counted against ``limit``.
            limit: at most this many hits (1 to 1,000).
            cursor: the ``next_cursor`` of the page before.

        Returns:
            The hits (:class:`~agui_store.records.SearchHit`), with ``next_cursor`` set
            when more follow (the search reads one hit past the page to know).

        Raises:
            InvalidArgumentError: a query of the wrong shape (the message says what), a
                ``limit`` or ``cursor`` that is not one.
            RunNotFoundError: no thread ``thread_id`` (in the ``scope``).
        """
        parsed = search_rules.parse(query)
        size = search.page_limit(limit)
        after = search.parse_cursor(cursor)
        intake.check_scope(scope)
        with self.reading() as tx:
            thread_pk = None
            if thread_id is not None:
                thread_pk = self._require_thread(tx, thread_id, scope)
            return search.search(tx, parsed, thread_pk, scope, after, size)
