"""What callers pass, checked before any SQL sees it: revisions, cursors, paths, options.

Pure functions (no I/O): the store resolves what these return. Each turns a value the
caller may have built from anything (a URL, a command line, a fuzzer) into either something
SQLite can bind or an answer: a revision no stored id can match names no run, an ancestor
count beyond any lineage has no such ancestor, a cursor beyond any sequence number has
nothing after it. What cannot be an answer is an :class:`InvalidArgumentError` (also a
``ValueError``) naming the argument.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from agui_store.errors import ArgumentTypeError, InvalidArgumentError

#: SQLite's largest integer: no sequence number, run key or lineage depth exceeds it.
MAX_INT64 = 2**63 - 1

#: ``REV~n`` (the n-th lineage ancestor; ``REV~`` is ``REV~1``) and ``REV^`` (the parent;
#: ``REV^0`` is the run itself), chained as git chains them: ``HEAD~1~1``, ``main^^``. ASCII
#: digits only: ``\\d`` would also take other scripts' digits, which ``int()`` accepts.
ANCESTOR_SUFFIX = re.compile(r"(?P<base>.+?)(?P<steps>(?:[~^][0-9]*)+)", re.ASCII | re.DOTALL)
_STEP = re.compile(r"([~^])([0-9]*)", re.ASCII)

#: ``@`` alone is git's short name for ``HEAD``.
HEAD_ALIAS = "@"

_LAST_CHAR = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def quote(value: object, limit: int = 80) -> str:
    """An id for an error message or a problem ``check()`` reports: quoted, and cut when it is
    absurdly long (ids can be megabytes long)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    length = len(value) if isinstance(value, (str, bytes)) else len(text)
    return f"{text[: limit - 1]}…' ({length} characters)"


def known_options(caller: str, options: Iterable[str], known: Iterable[str]) -> None:
    """Refuse an option ``caller`` does not take, naming it and the ones it takes: passed on
    as they are, a misspelled one would be Python's ``TypeError`` naming the parameters of
    a function the caller never called (``Store.__init__``)."""
    taken = list(known)
    unknown = [name for name in options if name not in taken]
    if unknown:
        raise ArgumentTypeError(
            f"{caller} takes no option {', '.join(map(repr, unknown))}; its options are "
            f"{', '.join(taken)}"
        )


def a_kind(value: object) -> str:
    """The type of ``value`` with its article, for a message: ``an int``, ``a list``
    (``None`` as itself)."""
    if value is None:
        return "None"
    kind = type(value).__name__
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def check_scope(scope: Any) -> None:
    """A scope is an owner's name (a non-empty string), or ``None``: the operator's calls,
    which see and write every thread."""
    if scope is None:
        return
    if not isinstance(scope, str) or not scope:
        # Another type is a programming error (a TypeError); an empty name is a bad value.
        # Both are store errors, so that a check inside a transaction is not taken for a bug.
        error = InvalidArgumentError if isinstance(scope, str) else ArgumentTypeError
        raise error(
            f"scope must be None (the operator) or an owner's name (a non-empty string), "
            f"not {quote(scope)}"
        )
    reason = unstorable(scope)
    if reason is not None:
        # No stored owner can have this name: an argument no store can answer.
        raise InvalidArgumentError(f"scope {quote(scope)} {reason}")


def flag(name: str, value: Any) -> bool:
    """A yes-or-no option (``dry_run=``) as a bool: anything else is refused, not read by its
    truthiness (``dry_run=None`` would erase, ``dry_run="no"`` would not)."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(
            f"{name}= must be True or False, not {a_kind(value)} ({quote(value)})"
        )
    return value


def check_progress(progress: Any) -> None:
    """``progress=`` is ``None`` or a callable: refused at the call, not in the middle of a
    transaction when it is first called."""
    if progress is not None and not callable(progress):
        raise ArgumentTypeError(f"progress= must be None or a callable, not {a_kind(progress)}")


def check_thread_id(thread_id: Any) -> None:
    """A ``thread_id=`` argument is ``None`` or a thread's id (a non-empty string)."""
    if thread_id is not None and (not isinstance(thread_id, str) or not thread_id):
        error = InvalidArgumentError if isinstance(thread_id, str) else ArgumentTypeError
        raise error(f"thread_id must be a non-empty string, not {quote(thread_id)}")


#: The longest id, in UTF-8 bytes, that every backend indexes: a PostgreSQL B-tree entry
#: holds at most about 2,700 bytes, and ids are keys of unique indexes.
MAX_ID_BYTES = 2048


def unstorable(value: str) -> str | None:
    """Why an id cannot be stored as text on every backend, or ``None``: text no backend
    holds (:func:`unstorable_text`), or more than :data:`MAX_ID_BYTES` (which PostgreSQL's
    indexes cannot hold)."""
    reason = unstorable_text(value)
    if reason is not None:
        return reason
    if len(value) > MAX_ID_BYTES // 4 and (size := len(value.encode())) > MAX_ID_BYTES:
        return (
            f"is {size:,} bytes long (UTF-8), and an id may be at most {MAX_ID_BYTES:,}, "
            "which PostgreSQL's indexes can hold"
        )
    return None


def unstorable_text(value: str) -> str | None:
    """Why text cannot be stored on every backend, or ``None``: a lone surrogate (not
    UTF-8), or a NUL character (which PostgreSQL's text cannot hold)."""
    if not storable_text(value):
        return (
            "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which cannot be "
            "stored as text"
        )
    if "\x00" in value:
        return "holds a NUL character (\\u0000), which PostgreSQL's text cannot hold"
    return None


def first_unstorable(
    named: Iterable[tuple[str, str | None]], *, text: bool = False
) -> tuple[str, str] | None:
    """The first ``(what, why)`` among ``(what, value)`` pairs whose value no store can hold
    (:func:`unstorable`, or a value that is not text; a ``None`` value is no value), or
    ``None``: every one can. ``text``: the values are text that no index holds, not ids
    (:func:`unstorable_text`: any length)."""
    for what, value in named:
        if value is None:
            continue
        if not isinstance(value, str):
            return what, f"is {a_kind(value)} ({quote(value)}), not text"
        reason = unstorable_text(value) if text else unstorable(value)
        if reason is not None:
            return what, reason
    return None


def storable_text(value: str) -> bool:
    """Whether SQLite text can hold ``value`` (valid UTF-8: no lone surrogate). Ids are
    checked with this when stored, so a revision that fails it names nothing."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def split_ancestor(ref: str) -> tuple[str, int] | None:
    """``(base, n)`` for ``base`` followed by ``~n`` and ``^`` steps (chained: ``HEAD~1^``
    is ``(HEAD, 2)``), else ``None``. A count beyond SQLite's integers (5,000 digits, say)
    is capped there: no lineage has that many ancestors either way, and the cap keeps
    ``int()`` away from Python's limit on digit strings.

    Raises:
        InvalidArgumentError: ``^n`` with ``n`` above 1: a run has one lineage parent, so
            there is no second one to name.
    """
    match = ANCESTOR_SUFFIX.fullmatch(ref)
    if not match:
        return None
    steps = 0
    for mark, count in _STEP.findall(match["steps"]):
        n = _count(count)
        if mark == "^" and n > 1:
            raise InvalidArgumentError(
                f"{quote(ref)}: a run has one lineage parent, so ^{count} names none "
                "(use ~n for the n-th ancestor)"
            )
        steps = min(steps + n, MAX_INT64)
    return match["base"], steps


def longer_bases(ref: str) -> list[tuple[str, int]]:
    """The other readings of ``ref`` as a base and ancestor steps than
    :func:`split_ancestor`'s, longest base first, as a run id may hold ``~`` or ``^``:
    ``r~2~1`` is also ``(r~2, 1)``. Empty for one step (``HEAD~1``); a reading whose steps
    hold ``^n`` with ``n`` above 1 is left out (:func:`split_ancestor` says why)."""
    match = ANCESTOR_SUFFIX.fullmatch(ref)
    if not match:
        return []
    steps = _STEP.findall(match["steps"])
    readings = []
    for k in range(len(steps) - 1, 0, -1):
        mark, count = steps[k]
        if mark == "^" and _count(count) > 1:
            break  # in every shorter reading's steps too
        base = match["base"] + "".join(m + c for m, c in steps[:k])
        readings.append((base, min(sum(_count(c) for _, c in steps[k:]), MAX_INT64)))
    return readings


def _count(digits: str) -> int:
    """A step's count: empty is 1, capped at SQLite's largest integer."""
    if not digits:
        return 1
    stripped = digits.lstrip("0")
    if len(stripped) > len(str(MAX_INT64)):
        return MAX_INT64
    return min(int(stripped or "0"), MAX_INT64)


def split_ranges(ref: str) -> list[tuple[str, str, bool]]:
    """Every way to read ``ref`` as git's ``a..b`` or ``a...b``, as ``(a, b, symmetric)``
    (``symmetric`` false: what ``b`` has that ``a`` lacks; true: what either has since
    their merge base; an empty side is ``HEAD``): at each ``..`` from the left, ``...``
    before ``..`` where three dots stand, since a side may hold ``..`` itself, as a run id
    may. Empty when ``ref`` holds no ``..``."""
    spans = []
    at = ref.find("..")
    while at != -1:
        if ref.startswith("...", at):
            spans.append((ref[:at] or "HEAD", ref[at + 3:] or "HEAD", True))
        spans.append((ref[:at] or "HEAD", ref[at + 2:] or "HEAD", False))
        at = ref.find("..", at + 1)
    return spans


def is_short_hash(ref: str) -> bool:
    """Whether ``ref`` can be an abbreviated content hash: 4 to 64 hex digits."""
    return 4 <= len(ref) <= 64 and all(c in "0123456789abcdefABCDEF" for c in ref)


def prefix_bound(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix``, in SQLite's
    text order (UTF-8 bytes, which is code point order); ``None`` when no string is above
    them all (``prefix`` is made of U+10FFFF only). ``prefix`` must be :func:`storable_text`.

    So ``run_id >= prefix AND run_id < bound`` is a range scan of exactly the run ids that
    start with ``prefix``.
    """
    stem = prefix.rstrip(chr(_LAST_CHAR))
    if not stem:
        return None
    code = ord(stem[-1]) + 1
    if code in _SURROGATES:  # not text: the next code point SQLite can hold
        code = _SURROGATES.stop
    return stem[:-1] + chr(code)


def cursor(after: Any) -> int:
    """``events(after=)`` as a sequence number: ``None`` is 0 (from the start); a cursor
    beyond SQLite's integers is capped (nothing comes after it)."""
    if after is None:
        return 0
    if isinstance(after, bool) or not isinstance(after, int):
        raise ArgumentTypeError(
            f"after= must be a sequence number (a non-negative int), not {a_kind(after)} "
            f"({quote(after)})"
        )
    if after < 0:
        raise InvalidArgumentError(
            f"after= must be a sequence number (a non-negative int), not {_short_int(after)}"
        )
    return min(after, MAX_INT64)


def _short_int(value: int) -> str:
    return str(value) if value.bit_length() < 200 else f"a {value.bit_length()}-bit number"


def path_text(path: Any) -> str:
    """A store path as text: ``str``, ``bytes`` (decoded as the file system does) or any
    ``os.PathLike``, and UTF-8 (no lone surrogate)."""
    try:
        text = os.fsdecode(path)
    except TypeError:
        raise InvalidArgumentError(
            f"a store path is text, bytes or a path object, not {type(path).__name__}"
        ) from None
    if not text:
        # SQLite would open a private temporary database: a store that vanishes on close.
        raise InvalidArgumentError(
            "the store path is empty: give a file path, ':memory:' or a postgresql:// URL"
        )
    if not storable_text(text):
        # SQLite takes a path, and PostgreSQL a URL, as UTF-8: refused before a file is made.
        raise InvalidArgumentError(
            f"the store path {quote(text, 300)} is not UTF-8 (it holds a lone surrogate: an "
            "unpaired \\ud800-\\udfff escape, or bytes of another encoding): SQLite opens a "
            "file by a UTF-8 name only, and PostgreSQL takes a UTF-8 URL; rename the file or "
            "choose another path"
        )
    return text


def positive_int(
    name: str, value: Any, *, minimum: int = 1, maximum: int | None = None, why: str = ""
) -> int:
    """An integer option, at least ``minimum`` (and at most ``maximum``, when given: ``why``
    then says what a larger value would break)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        shown = repr(value) if isinstance(value, (int, float, str)) else type(value).__name__
        raise InvalidArgumentError(f"{name} must be an integer >= {minimum}, not {shown[:60]}")
    if maximum is not None and value > maximum:
        raise InvalidArgumentError(f"{name} must be at most {maximum}, not {value}{why}")
    return value


def page_size(limit: Any) -> int | None:
    """``log(limit=)``: ``None`` (every run) or a positive int, capped at a database's largest
    integer (no lineage is that long)."""
    if limit is None:
        return None
    return min(positive_int("limit", limit), MAX_INT64)


def page_before(before: Any) -> str | None:
    """``runs(before=)``: ``None``, or a run id (text)."""
    if before is not None and not (isinstance(before, str) and before):
        error = InvalidArgumentError if isinstance(before, str) else ArgumentTypeError
        raise error(f"before= must be None or a run id, not {quote(before)}")
    _names_no_run("before=", before)
    return before


def page_cursor(cursor: Any) -> str | None:
    """``log(cursor=)``: ``None`` (the first page) or a run id, ``Log.next_cursor``."""
    if cursor is None:
        return None
    if not isinstance(cursor, str) or not cursor:
        error = InvalidArgumentError if isinstance(cursor, str) else ArgumentTypeError
        shown = quote(cursor) if isinstance(cursor, str) else f"{a_kind(cursor)} ({quote(cursor)})"
        raise error(
            f"cursor= must be None or a run id (a previous page's Log.next_cursor), not {shown}"
        )
    _names_no_run("cursor=", cursor)
    return cursor


def _names_no_run(name: str, value: str | None) -> None:
    """Refuse a run id argument that no stored run can have, before any backend sees it
    (PostgreSQL's driver refuses a NUL character where SQLite would find no run)."""
    reason = None if value is None else unstorable_text(value)
    if reason is not None:
        raise InvalidArgumentError(f"{name} {quote(value)} {reason}: it names no run")
