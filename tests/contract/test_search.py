"""``Store.search`` on every backend: the hits are exactly what a brute-force scan of every
view finds with the query language's own matcher, a page at a time, within a scope."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
import agui_store.aio
from agui_store import InvalidArgumentError, RunNotFoundError, testing
from tests.strategies import legal_streams

Found = set[tuple[str, str, str]]


def brute_force(store: agui_store.Store, query: str, scope: str | None = None) -> Found:
    """(thread, run, message) of every message a query finds: each thread's runs in the
    order they were recorded, each message text named by the first complete run whose
    view holds it."""
    found: Found = set()
    for thread_id in store.threads(scope=scope):
        seen: set[tuple[str, str]] = set()
        for run in store.runs(thread_id):
            if run.status == "incomplete":
                continue
            try:
                messages = store.checkout(run.run_id, thread_id=thread_id).messages
            except agui_store.InvalidEventError:
                continue  # a view the client cannot derive
            for m in messages:
                if not isinstance(m, dict) or not isinstance(m.get("id"), str):
                    continue
                if not testing.search_words(m):
                    continue
                key = (m["id"], testing.search_text(m))
                if key in seen:
                    continue
                seen.add(key)
                if testing.search_matches(query, m):
                    found.add((thread_id, run.run_id, m["id"]))
    return found


def every_page(store: agui_store.Store, query: str, limit: int, **where: Any) -> list[Any]:
    page = store.search(query, limit=limit, **where)
    hits = list(page)
    while page.next_cursor is not None:
        # A page names a next one only when it is full and another hit follows.
        assert len(page) == limit, (len(page), limit)
        cursor = page.next_cursor
        page = store.search(query, limit=limit, cursor=cursor, **where)
        assert page, f"{cursor}: the page after names no hit"
        # Each page starts after the last one's hits (a page that repeats one never ends).
        assert all(int(h.cursor) < int(cursor) for h in page), (cursor, list(page))
        hits.extend(page)
    return hits


def vocabulary(store: agui_store.Store) -> list[list[str]]:
    """The words of every message of every view, a list per message."""
    out = []
    for thread_id in store.threads():
        for run in store.runs(thread_id):
            try:
                messages = store.checkout(run.run_id, thread_id=thread_id).messages
            except agui_store.AguiStoreError:
                continue
            out.extend(testing.search_words(m) for m in messages if isinstance(m, dict))
    return [w for w in out if w]


@st.composite
def queries(draw: st.DrawFn, texts: list[list[str]]) -> str:
    """A query of one to three terms drawn from the stored words: words, prefixes, phrases
    of consecutive words, exclusions (never all of them)."""
    terms = []
    for i in range(draw(st.integers(1, 3))):
        words = draw(st.sampled_from(texts))
        at = draw(st.integers(0, len(words) - 1))
        kind = draw(st.sampled_from(["word", "prefix", "phrase", "exclude"]))
        if kind == "phrase" and at + 1 < len(words):
            # Quotes as typed, or as pasted from a document or a chat app.
            opening, closing = draw(st.sampled_from(['""', "\u201c\u201d", "\u201e\u201c",
                                                     "\uff02\uff02", "\u2018\u2019"]))
            term = opening + " ".join(words[at : at + 2]) + closing
        elif kind == "prefix":
            term = words[at][: draw(st.integers(1, len(words[at])))] + "*"
        else:
            term = words[at]
        minus = draw(st.sampled_from(["-", "\u2212", "\uff0d"]))
        terms.append((minus if kind == "exclude" and i > 0 else "") + term)
    return " ".join(terms)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=legal_streams(thread_id="t1", max_runs=3),
    second=legal_streams(thread_id="t2", max_runs=2),
    data=st.data(),
)
def test_search_finds_exactly_what_a_scan_of_every_view_finds(
    new_location: Any, first: list[dict[str, Any]], second: list[dict[str, Any]],
    data: st.DataObject,
) -> None:
    # A few rows wait outside SQLite's FTS5 table at a time: queries read both.
    pending = data.draw(st.integers(1, 4), label="pending rows")
    # An owner is searched from its own rows, or (0) from the words' rows.
    owner_rows = data.draw(st.sampled_from([0, 1000]), label="owner rows")
    with (
        testing.search_pending_rows(pending), testing.search_owner_rows(owner_rows),
        agui_store.open(new_location()) as store,
    ):
        for stream, owner in ((first, None), (second, "alice")):
            # A stream the store refuses leaves nothing: the other still counts.
            with contextlib.suppress(agui_store.InvalidEventError):
                store.append(stream, scope=owner)
        texts = vocabulary(store)
        if not texts:
            return
        query = data.draw(queries(texts), label="query")
        limit = data.draw(st.integers(1, 4), label="limit")
        hits = every_page(store, query, limit)
        assert {(h.thread_id, h.run_id, h.message_id) for h in hits} == brute_force(store, query)
        assert len(hits) == len({h.cursor for h in hits})
        assert [int(h.cursor) for h in hits] == sorted((int(h.cursor) for h in hits), reverse=True)
        for h in hits:  # each hit names where its run's view holds it
            view = store.checkout(h.run_id, thread_id=h.thread_id).messages
            assert view[h.position]["id"] == h.message_id
        scoped = every_page(store, query, limit, scope="alice")
        assert len(scoped) == len({h.cursor for h in scoped})
        assert [int(h.cursor) for h in scoped] == sorted(
            (int(h.cursor) for h in scoped), reverse=True
        )
        assert {(h.thread_id, h.run_id, h.message_id) for h in scoped} == brute_force(
            store, query, scope="alice"
        )
        everywhere = brute_force(store, query)
        for thread_id in store.threads():
            in_thread = every_page(store, query, limit, thread_id=thread_id)
            assert {(h.thread_id, h.run_id, h.message_id) for h in in_thread} == {
                hit for hit in everywhere if hit[0] == thread_id
            }


def conversation(thread: str, run: str, *texts: str, parent: str | None = None) -> list[Any]:
    started: dict[str, Any] = {"type": "RUN_STARTED", "threadId": thread, "runId": run}
    if parent is not None:
        started["parentRunId"] = parent
    events: list[dict[str, Any]] = [started]
    for i, text in enumerate(texts):
        mid = f"{run}-m{i}"
        events += [
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text},
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
        ]
    return [*events, {"type": "RUN_FINISHED", "threadId": thread, "runId": run}]


def tool_run(thread: str, run: str) -> list[Any]:
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "refund_order",
         "parentMessageId": "a1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"order": "A-17"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1",
         "content": "Refunded 42 EUR to the card"},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]


def test_a_hit_names_its_thread_run_message_role_tool_and_marks_the_words(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation("t", "r1", "I booked the Porto hotel for you, Café Ñandú."))
        store.append(tool_run("t", "r2"))
        [hit] = store.search("PORTO hotel")
        assert (hit.thread_id, hit.run_id, hit.message_id, hit.role, hit.tool_name) == (
            "t", "r1", "r1-m0", "assistant", None,
        )
        assert hit.marked() == "I booked the [Porto] [hotel] for you, Café Ñandú."
        assert hit.recorded_at is not None
        assert [h.message_id for h in store.search("cafe nandu")] == ["r1-m0"]
        call, result = store.search("refund*")
        assert (call.role, call.tool_name, result.role, result.tool_name) == (
            "tool", "refund_order", "assistant", "refund_order",
        ) or (result.role, result.tool_name, call.role, call.tool_name) == (
            "tool", "refund_order", "assistant", "refund_order",
        )
        assert [h.message_id for h in store.search('"42 eur"')] == ["r1"]
        assert store.search('"eur 42"') == []
        assert [h.message_id for h in store.search("refunded -card")] == []


def test_the_strings_of_json_tool_arguments_and_results_are_found_and_shown_as_read(
    store_location: str,
) -> None:
    # Python's json.dumps escapes every accent, and any JSON writer a line break or a tab.
    arguments = json.dumps({"note": "first line\nsecond line", "city": "Zürich"})
    result = r'{"warning": "\tindented", "price": 1.50, "path": "C:\\new"}'
    with agui_store.open(store_location) as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "note\0taker",
             "parentMessageId": "a1"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": arguments},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "TOOL_CALL_RESULT", "messageId": "m1", "toolCallId": "c1",
             "content": result},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        ])
        [call] = store.search("second zurich")
        assert (call.message_id, call.tool_name) == ("a1", None)  # a NUL no backend names
        assert "Zürich" in call.marked() and "\\u00fc" not in call.marked()
        assert [h.message_id for h in store.search("indented new")] == ["m1"]
        assert [h.message_id for h in store.search('"1.50"')] == ["m1"]  # digits as written
        assert store.search("nsecond") == [] and store.search("tindented") == []
        # Half an emoji escaped alone is no character: its escape stays as written.
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
                      {"type": "TOOL_CALL_RESULT", "messageId": "m2", "toolCallId": "c1",
                       "content": '{"note": "porto \\ud800 hotel"}'},
                      {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"}])
        [half] = store.search("porto hotel")
        assert "\\ud800" in half.marked() and half.line().encode("utf-8")


def test_a_message_is_found_by_its_words_until_its_distinct_words_take_a_megabyte(
    store_location: str,
) -> None:
    ids = [f"{i:07d}x" for i in range(130_000)]  # 1,040,000 bytes of distinct words
    with agui_store.open(store_location) as store:
        store.append(conversation("t", "r1", " ".join(ids)))
        assert [h.message_id for h in store.search(ids[0])] == ["r1-m0"]
        assert [h.message_id for h in store.search(ids[124_999])] == ["r1-m0"]
        assert store.search(ids[125_000]) == [] and store.search(ids[-1]) == []
        assert store.check().ok


def test_a_hit_is_one_line_whatever_breaks_a_line_in_its_thread_or_text(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation("a\u2028b", "r\u2029", "the porto\r\nhotel\x1b[2J"))
        [hit] = store.search("porto")
        assert hit.line() == "a\\u2028b  r\\u2029  assistant  the [porto] hotel\\x1b[2J"


def test_runs_without_a_checkpoint_of_their_own_are_found_from_their_views(
    store_location: str,
) -> None:
    with agui_store.open(store_location, checkpoint_events=1000) as store:
        store.append(conversation("t", "r1", "the porto hotel"))
        store.append(tool_run("t", "r2"))
        hits = store.search("porto OR refund*")
        assert hits == []
        assert [(h.run_id, h.message_id, h.role) for h in store.search("refund*")] == [
            ("r2", "r1", "tool"), ("r2", "a1", "assistant"),
        ]
        [hit] = store.search("hotel")
        assert hit.marked() == "the porto [hotel]"


def test_a_message_is_found_once_by_the_run_that_first_recorded_it(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation("t", "r1", "the lisbon flight"))
        store.append(conversation("t", "r2", "a taxi", parent="r1"))
        store.append(conversation("t", "r3", "a train", parent="r1"))  # a branch
        assert [(h.run_id, h.message_id) for h in store.search("lisbon")] == [("r1", "r1-m0")]
        assert {h.run_id for h in store.search("a")} == {"r2", "r3"}


def test_search_keeps_to_a_thread_and_to_a_scope(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation("mine", "r1", "porto"), scope="alice")
        store.append(conversation("theirs", "r2", "porto"), scope="bob")
        store.append(conversation("ops", "r3", "porto"))
        assert [h.thread_id for h in store.search("porto")] == ["ops", "theirs", "mine"]
        assert [h.thread_id for h in store.search("porto", scope="alice")] == ["mine"]
        assert [h.thread_id for h in store.search("porto", thread_id="theirs")] == ["theirs"]
        # Another owner's hits are not counted against the limit either.
        assert [h.thread_id for h in store.search("porto", scope="alice", limit=1)] == ["mine"]
        with pytest.raises(RunNotFoundError):
            store.search("porto", thread_id="theirs", scope="alice")
        store.append(conversation("mine", "r4", "porto again", "porto", parent="r1"))
        store.append(conversation("theirs", "r5", "porto", parent="r2"))
        for rows in (0, 1000):  # from the owner's rows, or from the word's rows
            with testing.search_owner_rows(rows):
                found = every_page(store, "porto", 1, scope="alice")
                assert [(h.run_id, h.message_id) for h in found] == [
                    ("r4", "r4-m1"), ("r4", "r4-m0"), ("r1", "r1-m0"),
                ]


def test_a_search_in_a_thread_finds_its_hits_among_other_threads_recorded_between(
    store_location: str,
) -> None:
    with testing.search_pending_rows(1), agui_store.open(store_location) as store:
        for i in range(4):
            store.append(conversation("other", f"o{i}", "porto"))
            store.append(conversation("mine", f"m{i}", f"porto {i}"))
        store.append(conversation("other", "o4", "porto"))
        found = every_page(store, "porto", 1, thread_id="mine")
        assert [(h.thread_id, h.run_id) for h in found] == [
            ("mine", "m3"), ("mine", "m2"), ("mine", "m1"), ("mine", "m0"),
        ]
        assert [h.run_id for h in every_page(store, "porto", 2, thread_id="other")] == [
            "o4", "o3", "o2", "o1", "o0",
        ]


def test_an_owners_search_finds_the_hits_of_each_of_its_threads_among_other_owners(
    store_location: str,
) -> None:
    with testing.search_pending_rows(1), agui_store.open(store_location) as store:
        store.append(conversation("a1", "x0", "porto"), scope="alice")
        for i in range(3):
            store.append(conversation("other", f"o{i}", "porto"), scope="bob")
            store.append(conversation("a2", f"y{i}", f"porto {i}"), scope="alice")
        store.append(conversation("a1", "x1", "porto 1"), scope="alice")
        for i in range(3, 6):
            store.append(conversation("other", f"o{i}", "porto"), scope="bob")
        store.append(conversation("a3", "z0", "porto"), scope="alice")
        store.append(conversation("other", "o6", "porto"), scope="bob")
        expected = [
            ("a3", "z0"), ("a1", "x1"), ("a2", "y2"), ("a2", "y1"), ("a2", "y0"), ("a1", "x0"),
        ]
        for rows in (0, 1000):  # from the owner's threads' rows, or from the word's rows
            with testing.search_owner_rows(rows):
                for limit in (1, 2, 20):
                    found = every_page(store, "porto", limit, scope="alice")
                    assert [(h.thread_id, h.run_id) for h in found] == expected
                assert store.search("zanzibar", scope="alice") == []
                assert len(store.search("porto", scope="bob", limit=50)) == 7


@pytest.mark.parametrize("pending", [1, 1000], ids=["words-in-the-index", "words-pending"])
def test_a_message_holding_half_an_emoji_is_found_and_erased_with_its_thread(
    store_location: str, pending: int
) -> None:
    # JavaScript producers split an emoji into two escaped surrogates; a message may hold one.
    half = "\ud83d"
    with testing.search_pending_rows(pending), agui_store.open(store_location) as store:
        store.append(conversation("split", "s1", f"porto {half} hotel"))
        store.append(conversation("kept", "k1", "porto hotel"))
        hits = store.search("hotel")
        assert [(h.thread_id, h.run_id) for h in hits] == [("kept", "k1"), ("split", "s1")]
        assert "".join(text for text, _ in hits[1].snippet) == f"porto {half} hotel"
        assert store.delete_thread("split").threads == 1
        assert [h.thread_id for h in store.search("porto")] == ["kept"]
        assert store.check().ok


def test_pages_go_on_with_the_cursor_until_the_last_hit(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        for i in range(5):
            store.append(conversation("t", f"r{i}", f"note {i} about porto"))
        first = store.search("porto", limit=2)
        assert [h.run_id for h in first] == ["r4", "r3"]
        second = store.search("porto", limit=2, cursor=first.next_cursor)
        third = store.search("porto", limit=2, cursor=second.next_cursor)
        assert [h.run_id for h in [*second, *third]] == ["r2", "r1", "r0"]
        assert third.next_cursor is None


@pytest.mark.parametrize("query", ["note", '"about porto"'], ids=["word", "phrase"])
def test_the_last_page_names_no_next_one_when_the_limit_divides_the_hits(
    store_location: str, query: str
) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation("t", "o", "porto about"))  # the phrase's words, not it
        for i in range(4):
            store.append(conversation("t", f"r{i}", f"note {i} about porto"))
        first = store.search(query, limit=2)
        second = store.search(query, limit=2, cursor=first.next_cursor)
        assert [h.run_id for h in [*first, *second]] == ["r3", "r2", "r1", "r0"]
        assert second.next_cursor is None
        assert store.search(query, limit=4).next_cursor is None
        assert store.search(query, limit=3).next_cursor is not None


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("-porto", "every term excludes"),
        ('"porto hotel', "quote is not closed"),
        ("po*rto", "'*' only ends a word"),
        ("porto *", "'*' only ends a word"),
        ('"in port*"', "a phrase holds no '\\*'; one after its closing quote"),
        ("!!!", "holds no word"),
        ("porto -", "'-' must be followed"),
        ("porto \u2018hotel", "not closed"),
        ("\u201cporto hotel", "not closed"),
        ("porto \uff0d", "'-' must be followed"),
    ],
)
def test_a_query_of_the_wrong_shape_says_what_is_wrong(
    store_location: str, query: str, says: str
) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation("t", "r1", "porto"))
        with pytest.raises(InvalidArgumentError, match=says):
            store.search(query)
        with pytest.raises(InvalidArgumentError, match="limit"):
            store.search("porto", limit=0)
        with pytest.raises(InvalidArgumentError, match="cursor"):
            store.search("porto", cursor="r1")
        with pytest.raises(InvalidArgumentError, match="no search page's next_cursor: a cursor"):
            store.search("porto", cursor="9" * 20)


def test_a_long_query_is_named_by_its_start_in_the_error(store_location: str) -> None:
    """A query too long, or of too many terms, is told in one line: its first words."""
    many_terms = " ".join(f"word{i:03}" for i in range(100))  # 799 characters, 100 terms
    with agui_store.open(store_location) as store:
        for query, says in ((many_terms, "100 terms"), ("porto " * 200, "longer than")):
            with pytest.raises(InvalidArgumentError, match=says) as refused:
                store.search(query)
            shown = query[:40] + "..."
            assert str(refused.value).startswith(f"search query {shown!r}: "), refused.value
            assert len(str(refused.value)) < 120, refused.value


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("*", "search query '*': a '*' only ends a word, as in hot*"),
        ("po*rto", "search query 'po*rto': a '*' only ends a word, as in hot*"),
        ("porto w*rd", "search query 'porto w*rd' at 'w*rd': a '*' only ends a word, as in hot*"),
        ("porto -*", "search query 'porto -*' at '-*': a '*' only ends a word, as in hot*"),
        (
            '"in p*rt"',
            "search query '\"in p*rt\"': a phrase holds no '*'; one after its closing quote "
            'makes its last word a prefix, as in "hotel in port"*',
        ),
        (
            'porto "in p*rt"',
            "search query 'porto \"in p*rt\"' at '\"in p*rt\"': a phrase holds no '*'; one "
            'after its closing quote makes its last word a prefix, as in "hotel in port"*',
        ),
        (
            '"porto hotel',
            "search query '\"porto hotel': a quote is not closed; phrases are written "
            '"like this"',
        ),
        (
            'river "porto hotel',
            "search query 'river \"porto hotel' at '\"porto hotel': a quote is not closed; "
            'phrases are written "like this"',
        ),
        ("-", "search query '-': a '-' must be followed by the word or phrase to leave out"),
        (
            "porto - hotel",
            "search query 'porto - hotel' at '-': a '-' must be followed by the word or phrase "
            "to leave out",
        ),
        (
            "porto -- hotel",
            "search query 'porto -- hotel' at '--': a '-' must be followed by the word or "
            "phrase to leave out",
        ),
        ("-porto", "search query '-porto': every term excludes; give at least one word to find"),
    ],
)
def test_a_query_of_the_wrong_shape_is_named_once_and_its_wrong_term_only_among_others(
    store_location: str, query: str, says: str
) -> None:
    with agui_store.open(store_location) as store:
        with pytest.raises(InvalidArgumentError) as refused:
            store.search(query)
        assert str(refused.value) == says


def test_a_long_wrong_term_is_named_by_its_start_in_the_error(store_location: str) -> None:
    term = "w*rd" + "x" * 200
    with agui_store.open(store_location) as store:
        with pytest.raises(InvalidArgumentError) as refused:
            store.search(f"porto {term}")
        shown = term[:40] + "..."
        assert f" at {shown!r}: a '*' only ends a word" in str(refused.value), refused.value
        assert len(str(refused.value)) < 160, refused.value


@pytest.mark.parametrize("pending", [1, 3])
def test_forgetting_a_thread_takes_it_out_of_the_index(store_location: str, pending: int) -> None:
    with testing.search_pending_rows(pending), agui_store.open(store_location) as store:
        store.append(conversation("gone", "r1", "porto", "lisbon"))
        store.append(conversation("kept", "r2", "porto"))
        store.append(conversation("gone", "r3", "porto taxi", parent="r1"))
        testing.forget_thread_search(store, "gone")
        assert [h.thread_id for h in store.search("porto")] == ["kept"]
        assert store.search("lisbon") == [] and store.search("taxi") == []


def test_a_copied_or_imported_thread_is_searchable_at_once(
    new_location: Any, tmp_path: Any
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        store.append(conversation("t", "r1", "the porto hotel"))
    agui_store.copy(source, target)
    with agui_store.open(target) as store:
        assert [h.run_id for h in store.search("hotel")] == ["r1"]
    dump = tmp_path / "t.jsonl"
    dump.write_text("\n".join(json.dumps(e) for e in tool_run("u", "r9")))
    with agui_store.open(target) as store:
        store.import_file(dump)
        assert [h.thread_id for h in store.search("refund*")] == ["u", "u"]


def test_the_async_store_searches_alike(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation("t", "r1", "porto"))

    async def search() -> list[Any]:
        async with agui_store.aio.open(store_location, writer="thread") as astore:
            return list(await astore.search("porto"))

    assert [h.run_id for h in asyncio.run(search())] == ["r1"]


def test_events_after_a_runs_end_change_what_is_found_and_an_erasure_forgets_it_all(
    store_location: str,
) -> None:
    """Events recorded after a run's end (``check_sequence=False``) move the messages of
    the runs below it: the index follows the views, and an erasure then takes every row."""
    with testing.search_pending_rows(1), agui_store.open(
        store_location, checkpoint_events=1000
    ) as store:
        store.append(conversation("t", "r1", "the porto hotel"))
        store.append(conversation("t", "r2", "a lisbon taxi", parent="r1"))
        store.append(
            conversation("t", "late", "zanzibar ferry")[1:-1], thread_id="t", run_id="r1",
            check_sequence=False,
        )
        store.derive()  # the runs below are left underived until then
        for query in ("porto", "lisbon", "zanzibar", "taxi -porto"):
            assert {(h.thread_id, h.run_id, h.message_id) for h in every_page(
                store, query, 5
            )} == brute_force(store, query), query
        store.delete_thread("t")
        for query in ("porto", "lisbon", "zanzibar"):
            assert store.search(query) == []


def test_a_term_of_punctuation_or_emoji_alone_is_passed_over(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation("t", "r1", "porto and lisbon"))
        found = [h.message_id for h in store.search("porto lisbon")]
        assert found != []
        for query in ("porto & lisbon", "porto , lisbon", "porto 🏨 lisbon", "porto — -!"):
            assert [h.message_id for h in store.search(query)] == found
        with pytest.raises(InvalidArgumentError, match="holds no word"):
            store.search("& —")
        # A phrase and a word side by side are two terms, whichever comes first.
        assert [h.message_id for h in store.search('"porto"lisbon')] == found
        assert [h.message_id for h in store.search('porto"lisbon"')] == found


@pytest.mark.parametrize("pending", [1, 1000], ids=["moved", "pending"])
def test_chinese_and_japanese_are_found_by_any_run_of_their_characters(
    store_location: str, pending: int
) -> None:
    texts = [
        "明日東京都に行きたいです", "帮我预订酒店\uff0cAPI调用失败了", "京東の本社",
        "서울에서 만나요",
    ]
    with testing.search_pending_rows(pending), agui_store.open(store_location) as store:
        store.append(conversation("t", "r1", *texts))

        def found(query: str) -> list[str]:
            return [h.message_id for h in store.search(query)]

        assert found("東京") == ["r1-m0"]  # not 京東: the characters in this order
        assert found("京東") == ["r1-m2"]
        assert found("行きたい") == ["r1-m0"]
        assert found("预订酒店") == ["r1-m1"] and found("api 调用") == ["r1-m1"]
        assert found("失败") == ["r1-m1"] and found("败失") == []
        assert found("東京 -本社") == ["r1-m0"]
        assert found('"東京都"') == ["r1-m0"] and found("東京都*") == ["r1-m0"]
        assert found("서울*") == ["r1-m3"] and found("서울") == []
        [hit] = store.search("東京")
        assert hit.marked() == "明日[東京]都に行きたいです"
        for query in ("東京", "预订酒店", "京東 -東京"):
            assert {(h.thread_id, h.run_id, h.message_id) for h in store.search(query)} == (
                brute_force(store, query)
            )


@pytest.mark.parametrize(
    ("pasted", "typed"),
    [
        ("\u201cporto hotel\u201d", '"porto hotel"'),  # “…”
        ("\u201eporto hotel\u201c", '"porto hotel"'),  # „…“
        ("\u201dporto hotel\u201d", '"porto hotel"'),  # ”…”
        ("\uff02porto hotel\uff02", '"porto hotel"'),  # fullwidth
        ("\u00abporto hotel\u00bb", '"porto hotel"'),  # guillemets
        ("\u2018porto hotel\u2019", '"porto hotel"'),  # single curly quotes
        ("\u201aporto hotel\u2018*", '"porto hotel"*'),  # low and high, then a prefix
        ("hotel \uff0driver", "hotel -river"),  # fullwidth minus
        ("hotel \u2212\u201cthe river\u201d", 'hotel -"the river"'),  # minus sign
        ("\u2018don\u2019t go\u2019", '"don t go"'),  # an apostrophe inside a phrase
        ("don\u2019t", '"don t"'),  # an apostrophe in a word is no quote
        ("porto \u2014 hotel", "porto hotel"),  # a dash is punctuation, not a minus
    ],
)
def test_pasted_quotes_and_minus_signs_read_as_typed_ones(
    store_location: str, pasted: str, typed: str
) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation(
            "t", "r1", "the Porto hotel by the river", "a hotel in Porto", "Porto hotels",
            "don't go to the hotel", "hotel porto, the river",
        ))
        found = {(h.thread_id, h.run_id, h.message_id) for h in store.search(pasted)}
        assert found == brute_force(store, typed) == brute_force(store, pasted)
        assert found != set()


@pytest.mark.parametrize(
    ("typed_by_an_input_method", "typed"),
    [
        ("refund\uff0a", "refund*"),  # fullwidth asterisk
        ("refund\ufe61", "refund*"),  # small asterisk
        ("\u201cthe refund\u201d\uff0a", '"the refund"*'),  # after a phrase
        ("\u6771\u4eac\uff0a", "\u6771\u4eac*"),  # Tokyo, then a fullwidth asterisk
        ("porto \uff0drefund\uff0a", "porto -refund*"),
    ],
)
def test_a_fullwidth_asterisk_makes_a_prefix_as_the_ascii_one_does(
    store_location: str, typed_by_an_input_method: str, typed: str
) -> None:
    with agui_store.open(store_location) as store:
        store.append(conversation(
            "t", "r1", "the refund", "the refunded order", "porto refunds", "porto",
            "\u6771\u4eac\u90fd", "\u6771\u4eac",
        ))
        hits = store.search(typed_by_an_input_method)
        assert {(h.thread_id, h.run_id, h.message_id) for h in hits} == brute_force(store, typed)
        assert [h.marked() for h in hits] == [h.marked() for h in store.search(typed)]
        with pytest.raises(InvalidArgumentError, match="'\\*' only ends a word"):
            store.search("po\uff0arto")


@pytest.mark.parametrize("pending", [1, 1000], ids=["moved", "pending"])
def test_a_korean_prefix_matches_whole_syllables_not_the_letters_inside_one(
    store_location: str, pending: int
) -> None:
    import unicodedata

    texts = ["석사 학위", "서울에서 만나요", "서우 친구", unicodedata.normalize("NFD", "서울 시청")]
    with testing.search_pending_rows(pending), agui_store.open(store_location) as store:
        store.append(conversation("t", "r1", *texts))

        def found(query: str) -> list[str]:
            return sorted(h.message_id for h in store.search(query))

        assert found("서우*") == ["r1-m2"]  # not 서울: 울 is no 우 with a final consonant
        assert found("서*") == ["r1-m1", "r1-m2", "r1-m3"]  # not 석사
        assert found("석*") == ["r1-m0"] and found("서울*") == ["r1-m1", "r1-m3"]
        assert found("서울") == ["r1-m3"] and found("서") == []
        # Text written with its syllables decomposed (as macOS writes file names) reads as
        # the syllables, and a query typed so finds what the syllables do.
        assert found(unicodedata.normalize("NFD", "서울*")) == ["r1-m1", "r1-m3"]
        assert sorted(h.marked() for h in store.search("서*")) == sorted([
            "[서우] 친구", "[서울에서] 만나요", f"[{texts[3][:5]}] {texts[3][6:]}",
        ])
        for query in ("서우*", "서*", "석*", "서울*", "-석사 서*"):
            assert {(h.thread_id, h.run_id, h.message_id) for h in store.search(query)} == (
                brute_force(store, query)
            )
