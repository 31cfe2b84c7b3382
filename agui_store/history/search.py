"""Full-text search, defined once: what text a message is found by, how that text is cut
into words, the query language, and a matcher that decides a hit from the words alone.

Both backends index the words this module gives (SQLite in an FTS5 table, PostgreSQL in a
``tsvector``) and narrow a query down to candidates with their own full-text search; this
module's :meth:`Query.matches` is the definition they answer to (the contract suite compares
them with it over every view of a store), and what a phrase is checked with after the
database has found the messages holding its words.

**Words.** A message's text is folded (decomposed as NFKD, then case folded as
:meth:`str.casefold` does, with every combining mark dropped, so ``Café`` and ``CAFE`` are
both ``cafe``, as are mathematical bold or double-struck letters; Hangul syllables are
composed again, so Korean is matched a syllable at a time), then cut into runs of
Unicode letters and digits (``_`` cuts words too, so ``refund`` finds the tool
``refund_order``, and ``refund_order`` is the phrase of both).
In Chinese and Japanese, written without spaces, each Han, Hiragana or Katakana character is
a word, and a run of them the phrase of its characters (``東京`` finds ``東京都``).
A word longer than :data:`MAX_WORD` characters (a hash, a base64 blob) counts by its
first :data:`MAX_WORD` characters, in the text and in a query alike.

**Queries.** Terms separated by spaces, all of which must match:

- ``porto`` a word;
- ``"porto hotel"`` a phrase: these words, one after the other;
- ``hot*`` a prefix: any word starting with ``hot`` (on a phrase, its last word);
- ``-porto`` or ``-"porto hotel"``: messages holding it are left out.

Quotes and minus signs pasted from documents and chat apps read as typed ones
(:data:`DOUBLE_QUOTES`, :data:`SINGLE_OPENING_QUOTES`, :data:`MINUS_SIGNS`):
curly, low and fullwidth quotes make a phrase, and a minus sign or a fullwidth one
leaves a term out; a fullwidth asterisk, as input methods type it, makes a prefix
(:data:`STARS`).

A term that folds into several words (``e-mail``) is the phrase of them. A query with no
term to find, an unclosed quote, or a ``*`` or ``-`` anywhere else raises
:class:`~agui_store.errors.InvalidArgumentError` saying what is wrong.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agui_store.errors import InvalidArgumentError

#: A word counts by at most this many characters (PostgreSQL keeps a lexeme below 2 KB, and
#: a longer "word" is an identifier or an encoded blob, not something a person types whole).
MAX_WORD = 64
#: A message is found by its words until its distinct words take this many bytes of UTF-8:
#: the words after the one that would pass it are not indexed, on either backend.
#: PostgreSQL keeps a message's words in one ``tsvector``, whose words must stay under 1 MB
#: (a larger one is kept wrong, not refused); a message that large is a tool result of ids
#: or a blob, not prose.
MAX_DISTINCT_BYTES = 1_000_000
#: The longest query taken, in characters, and the most terms in one.
MAX_QUERY = 1000
MAX_TERMS = 32
#: Words of context a snippet shows on each side of the first match.
SNIPPET_WORDS = 8
#: The most characters a snippet shows of one word (its first, those it is found by) or of
#: the text between two words: a blob or a line of punctuation is not read whole in a list
#: of hits.
SNIPPET_PIECE = 64

#: The scripts written without spaces between words, each of whose characters is a word of
#: its own: Han ideographs (with their extensions and compatibility forms), Hiragana and
#: Katakana (halfwidth forms fold to these). A run of them is found as the phrase of its
#: characters, so ``東京`` finds ``東京都`` wherever it stands in the text, as a search box
#: in these languages is expected to. Hangul is left whole: Korean writes spaces between
#: words.
_UNSPACED = (
    "\u3005-\u3007\u3021-\u3029\u3038-\u303b"  # ideographic marks and numerals
    "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff"  # Hiragana, Katakana and its extension
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han: extension A, unified, compatibility
    "\U0001aff0-\U0001b16f"  # Kana: historic and small forms
    "\U00020000-\U000323af"  # Han: extensions B to I
)
# One character of :data:`_UNSPACED`, and its share of a snippet's window in thirds of a word
# (a word of another script takes three).
_UNSPACED_CHAR = re.compile(f"[{_UNSPACED}]")
# One character of :data:`_UNSPACED` that is a word of its own (not a combining kana mark).
_UNSPACED_WORD = re.compile(rf"[{_UNSPACED}](?<![\W_])")
_WORD_THIRDS = 3
# Letters and digits: ``_`` cuts words, so ``refund`` finds the tool ``refund_order``; a
# character of :data:`_UNSPACED` is a word alone.
_WORD = re.compile(rf"(?![\W_])[{_UNSPACED}]|[^\W_{_UNSPACED}]+")
# The same words in ASCII text.
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
_SPACES = re.compile(r"\s+")
# What a snippet cuts (:data:`SNIPPET_PIECE`): a word (a run of letters and digits of the
# spaced scripts; in text that is not ASCII, with the marks inside it:
# :func:`_long_word_as_written`) and a stretch between words (a run of neither) longer than
# that.
_LONG_WORD = re.compile(rf"[^\W_{_UNSPACED}]{{{SNIPPET_PIECE + 1},}}")
_LONG_GAP = re.compile(rf"[\W_]{{{SNIPPET_PIECE + 1},}}")


#: Latin letters whose stroke or ligature no decomposition takes apart, as a reader who types
#: without them writes them: ``lodz`` finds ``Łódź``, ``kobenhavn`` finds ``København``.
_PLAIN_LETTERS = {
    "ł": "l", "ø": "o", "đ": "d", "ð": "d", "ħ": "h", "ŧ": "t", "ŀ": "l", "\u0131": "i",
    "æ": "ae", "œ": "oe", "þ": "th",
}


#: The zero-width space, an invisible format character that separates words (Thai and Khmer
#: write it between words, and Unicode's word boundaries fall on it): it cuts words.
_ZERO_WIDTH_SPACE = 0x200B


def _deleted_by_fold(char: str) -> bool:
    """Whether folding deletes a character: a combining mark (categories Mn, Mc, Me), or an
    invisible format character (Cf: a soft hyphen, a zero-width joiner, a word joiner, a
    direction mark), which a word holds without being cut by it; not the zero-width space."""
    category = unicodedata.category(char)
    return category.startswith("M") or (category == "Cf" and ord(char) != _ZERO_WIDTH_SPACE)


#: :func:`_deleted_by_fold` of the characters texts hold, remembered.
_is_left_out = functools.lru_cache(maxsize=65536)(_deleted_by_fold)


#: The leading consonants of Hangul's conjoining jamo, with which a syllable NFKD took apart
#: begins (and one written as jamo, or as the compatibility jamo NFKD makes them).
_HANGUL_LEADS = frozenset(map(chr, range(0x1100, 0x1113)))


def fold(text: str) -> str:
    """``text`` as it is matched: decomposed (NFKD), case folded, without combining marks
    and invisible format characters, and with the Latin letters no decomposition takes
    apart written plain (:data:`_PLAIN_LETTERS`); Hangul syllables, which NFKD takes apart
    into their letters (jamo), composed again, so that Korean is matched a syllable at a
    time (``서*`` finds ``서울``, not ``석사``). Decomposed before it is folded, since a
    decomposition can give capitals (mathematical and double-struck capitals give plain
    ones, ``℃`` gives ``°C``)."""
    if text.isascii():  # the common case: NFKD leaves ASCII as it is, casefold lowers it
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text).casefold()
    if not unicodedata.is_normalized("NFKD", decomposed):  # marks a fold put out of order
        decomposed = unicodedata.normalize("NFKD", decomposed)
    # A text holds few distinct characters: classify those, then replace them. A few (an
    # accent or two) go a ``replace`` each, a search in C; ``translate`` looks every
    # character up in a mapping, ten times slower, and is kept for texts of many.
    held = set(decomposed)
    changed = {c: "" for c in held if _is_left_out(c)}
    changed.update((c, _PLAIN_LETTERS[c]) for c in held.intersection(_PLAIN_LETTERS))
    if len(changed) > 8:
        decomposed = decomposed.translate({ord(c): v for c, v in changed.items()})
    else:
        for char, plain in changed.items():
            decomposed = decomposed.replace(char, plain)
    if _HANGUL_LEADS.isdisjoint(held):
        return decomposed
    # Without marks, the only characters NFC composes are Hangul jamo: it gives back the
    # syllables NFKD took apart, so a prefix ends on a whole syllable (C code, some fifty
    # times faster than composing them in Python).
    return unicodedata.normalize("NFC", decomposed)


# ASCII text (most of what agents say): every byte but a letter or a digit becomes a space
# and letters are lowered, in one C pass over the encoded text (a bytes table: far faster
# than a str mapping); str.split then cuts the words the pattern would.
_ASCII_CUT = bytes(
    ord(chr(c).lower()) if chr(c).isalnum() else 0x20 for c in range(128)
) + bytes(128)


def words(text: str) -> list[str]:
    """The words of ``text``, folded, in order (each cut to :data:`MAX_WORD` characters, and
    none after its distinct words reach :data:`MAX_DISTINCT_BYTES`)."""
    found: list[str] = []
    for block in _word_blocks(text):
        found += block
    return found


#: How much of a text :func:`_word_blocks` cuts into words at a time, in characters: a long
#: message (a file a tool read, tens of megabytes) would otherwise be a string per word all at
#: once, some fifty times its own size.
_BLOCK = 1 << 20
_SPACE = re.compile(r"\s")


def _word_blocks(text: str) -> Iterator[list[str]]:
    """The words of ``text`` (:func:`words`), a block of about :data:`_BLOCK` characters at a
    time. A block ends before a white space character, which no word holds, so no word
    spans two; folding joins no characters across one (only a syllable's jamo), so a block
    folds as the whole would."""
    seen: set[str] = set()
    total = 0
    start = 0
    while start < len(text):
        space = _SPACE.search(text, start + _BLOCK)
        end = len(text) if space is None else space.start()
        found, most_bytes = _block_words(text[start:end] if start or end < len(text) else text)
        if start == 0 and end == len(text) and most_bytes <= MAX_DISTINCT_BYTES:
            yield found  # the whole text, within the budget whatever it holds: no count
            return
        new = set(found).difference(seen)
        added = sum(len(word.encode("utf-8", "surrogatepass")) for word in new)
        if total + added > MAX_DISTINCT_BYTES:  # rare: the block where the budget ends
            yield _within_distinct_bytes(found, seen, total)
            return
        yield found
        seen |= new
        total += added
        start = end


def _block_words(text: str) -> tuple[list[str], int]:
    """The words of ``text`` (folded, cut to :data:`MAX_WORD`), and at most how many bytes
    of UTF-8 they take."""
    found: list[str]
    if text.isascii():
        found = text.encode("ascii").translate(_ASCII_CUT).decode("ascii").split()
        most_bytes = len(text)
    else:
        folded = fold(text)
        found = _WORD.findall(folded)
        most_bytes = 4 * len(folded)  # no character takes more than 4 bytes of UTF-8
    if found and max(map(len, found)) > MAX_WORD:  # rare: cut only then
        found = [w[:MAX_WORD] for w in found]
    return found, most_bytes


def _within_distinct_bytes(found: list[str], seen: set[str], total: int) -> list[str]:
    """``found`` up to the word whose own first occurrence would take the distinct words
    (``seen`` before it, of ``total`` bytes) past :data:`MAX_DISTINCT_BYTES` of UTF-8."""
    for at, word in enumerate(found):
        if word not in seen:
            total += len(word.encode("utf-8", "surrogatepass"))
            if total > MAX_DISTINCT_BYTES:
                return found[:at]
            seen.add(word)
    return found


# Each byte that is not a space as ``x``: a word longer than :data:`MAX_WORD` is then a run of
# ``x`` a fast substring search finds, in C, without cutting the text into words.
_ASCII_MARK = bytes(0x20 if c == 0x20 else ord("x") for c in range(256))
_TOO_LONG = b"x" * (MAX_WORD + 1)


def index_text(text: str) -> str:
    """The words of ``text`` (:func:`words`) in order, separated by spaces (one or more), as
    a full-text index takes them: ``" ".join(words(text))`` but for the runs of spaces, the
    string ``str.split`` gives :func:`words` of back. For ASCII text with no word longer
    than :data:`MAX_WORD` it is made in three C passes, without a string per word."""
    if text.isascii() and len(text) <= MAX_DISTINCT_BYTES:
        cut = text.encode("ascii").translate(_ASCII_CUT)
        if _TOO_LONG not in cut.translate(_ASCII_MARK):
            return cut.decode("ascii")
    return " ".join(" ".join(block) for block in _word_blocks(text))


def message_text(message: dict[str, Any]) -> str:
    """The text a message is found by, as ``checkout`` restores it: its content (a string,
    or the text of its content parts), the name and arguments of each tool call it makes,
    and for a tool result its content. An activity message, or a value the client would
    not show as text, adds nothing. Tool-call arguments and a tool result that are JSON
    count with their strings' escapes read (:func:`as_read`)."""
    pieces: list[str] = []
    content = message.get("content")
    role = message.get("role")
    if role == "activity":
        return ""
    if isinstance(content, str):
        pieces.append(as_read(content) if role == "tool" else content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
    calls = message.get("toolCalls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                if isinstance(function.get("name"), str):
                    pieces.append(function["name"])
                if isinstance(function.get("arguments"), str):
                    pieces.append(as_read(function["arguments"]))
    return "\n".join(pieces)


# An escape of a JSON string: one character, or a run of UTF-16 code units (a character
# beyond the BMP is two).
_JSON_ESCAPE = re.compile(r'(?:\\u[0-9a-fA-F]{4})+|\\["\\/bfnrt]')
_JSON_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n",
                       "r": "\r", "t": "\t"}


def as_read(text: str) -> str:
    """``text`` as a reader reads it: a JSON document (tool-call arguments, a tool result)
    with its strings' escapes replaced by the characters they stand for, so that the
    words of a line after ``\\n`` or of ``Z\\u00fcrich`` are found and shown as written; any
    other text as it is. Everything else of the document stays as written (numbers keep
    their digits, keys their places)."""
    if "\\" not in text or not _is_json(text):
        return text
    return _JSON_ESCAPE.sub(_unescaped, text)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _unescaped(escape: re.Match[str]) -> str:
    found = escape.group()
    if found[1] != "u":
        return _JSON_SHORT_ESCAPES[found[1]]
    units = bytes.fromhex("".join(found[i + 2 : i + 6] for i in range(0, len(found), 6)))
    # Two code units that make a pair are one character. A lone surrogate is no character
    # any text holds: its escape stays as written, as a hit's snippet must be writable.
    try:
        return units.decode("utf-16-be")
    except UnicodeDecodeError:
        return found


def tool_name(message: dict[str, Any], names: dict[str, str]) -> str | None:
    """The tool a message is about: for an assistant message, the name of its first tool
    call; for a tool result, the name of the call it answers (``names``: tool-call id to
    name, of the calls before it in the view); else ``None``."""
    calls = message.get("toolCalls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                return str(function["name"])
    if message.get("role") == "tool":
        call_id = message.get("toolCallId")
        if isinstance(call_id, str):
            return names.get(call_id)
    return None


def tool_names(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Tool-call id to tool name, for every tool call in ``messages``."""
    names: dict[str, str] = {}
    for m in messages:
        calls = m.get("toolCalls") if isinstance(m, dict) else None
        if isinstance(calls, list):
            for call in calls:
                if not isinstance(call, dict):
                    continue
                function = call.get("function")
                if isinstance(call.get("id"), str) and isinstance(function, dict):
                    name = function.get("name")
                    if isinstance(name, str):
                        names[call["id"]] = name
    return names


@dataclass(frozen=True)
class Term:
    """One term of a query: its words (several: a phrase), whether its last word is a
    prefix, and whether it excludes."""

    words: tuple[str, ...]
    prefix: bool = False
    exclude: bool = False

    def found_in(self, text_words: Sequence[str], present: frozenset[str]) -> bool:
        """Whether the words of a text (in order, and as a set) hold this term."""
        *head, last = self.words
        if not head:
            if not self.prefix:
                return last in present
            return any(w.startswith(last) for w in present)
        if not all(w in present for w in head):
            return False
        words = list(text_words)
        n = len(self.words)
        at = -1
        while True:  # from one place of the phrase's first word to the next, found in C
            try:
                at = words.index(head[0], at + 1, len(words) - n + 1)
            except ValueError:
                return False
            if self.stands_at(words, at):
                return True

    def stands_at(self, text_words: Sequence[str], at: int) -> bool:
        """Whether this term's words are the text's from word ``at`` on (the last one
        begun, for a prefix)."""
        *head, last = self.words
        n = len(self.words)
        if at < 0 or at + n > len(text_words):
            return False
        end = text_words[at + n - 1]
        return list(text_words[at : at + n - 1]) == head and (
            end == last or (self.prefix and end.startswith(last))
        )


@dataclass(frozen=True)
class Query:
    """A parsed query (:func:`parse`): the terms to find and the terms to leave out."""

    text: str
    terms: tuple[Term, ...]

    @property
    def found(self) -> tuple[Term, ...]:
        """The terms every hit holds."""
        return tuple(t for t in self.terms if not t.exclude)

    @property
    def excluded(self) -> tuple[Term, ...]:
        """The terms no hit holds."""
        return tuple(t for t in self.terms if t.exclude)

    @property
    def has_phrase(self) -> bool:
        """Whether a term is a phrase: the database finds its words, and
        :meth:`matches` then checks their order."""
        return any(len(t.words) > 1 for t in self.terms)

    def matches(self, text_words: Sequence[str]) -> bool:
        """Whether a text whose :func:`words` are ``text_words`` is a hit."""
        present = frozenset(text_words)
        return all(t.found_in(text_words, present) for t in self.found) and not any(
            t.found_in(text_words, present) for t in self.excluded
        )

    def matches_text(self, text: str) -> bool:
        """:meth:`matches` of the :func:`words` of ``text``, without its whole list of words:
        a message of megabytes (a file a tool read) would be a string per word, some fifty
        times its size, to tell whether a phrase stands in it. ASCII text (what agents mostly
        say) is searched for each term's words, one after the other, in C
        (:func:`_stands_in_ascii`); other text is read a block of words at a time."""
        if text.isascii():
            lowered = text.lower()
            return all(_stands_in_ascii(t, lowered) for t in self.found) and not any(
                _stands_in_ascii(t, lowered) for t in self.excluded
            )
        keep = max(len(t.words) for t in self.terms) - 1  # a phrase's words before a block
        wanted = list(self.found)
        before: list[str] = []
        for block in _word_blocks(text):
            held = before + block if before else block
            present = frozenset(held)
            if any(t.found_in(held, present) for t in self.excluded):
                return False
            wanted = [t for t in wanted if not t.found_in(held, present)]
            if not wanted and not self.excluded:
                return True
            before = held[max(0, len(held) - keep) :] if keep else []
        return not wanted


def _stands_in_ascii(term: Term, lowered: str) -> bool:
    """Whether ``term`` stands among the :func:`words` of lowered ASCII text: where its
    first word, then the others, stand one after the other in the text (a pattern that
    begins with the word, which a search finds in C) after a character that is not a
    letter or a digit, and within the words kept of a message whose distinct words pass
    :data:`MAX_DISTINCT_BYTES` (no more than the characters they are made of)."""
    pattern = _ascii_term(term.words, term.prefix)
    at = 0
    while (found := pattern.search(lowered, at)) is not None:
        start = found.start()
        if start == 0 or not lowered[start - 1].isalnum():
            # The first place decides: a later one stands past the kept words too.
            return found.end() <= MAX_DISTINCT_BYTES or _keeps_every_word(lowered, found.end())
        at = start + 1
    return False


def _keeps_every_word(lowered: str, end: int) -> bool:
    """Whether the :func:`words` of lowered ASCII text are all its words up to ``end``:
    whether the distinct words before it, each cut to :data:`MAX_WORD`, stay within
    :data:`MAX_DISTINCT_BYTES`. Counted a block of about a sixteenth of :data:`_BLOCK`
    characters at a time, as bytes: no string per word is made, nor a copy of the text."""
    seen: set[bytes] = set()
    total = start = 0
    while start < end:
        space = _SPACE.search(lowered, start + max(1, _BLOCK >> 4), end)
        stop = end if space is None else space.start()
        new = set(lowered[start:stop].encode("ascii").translate(_ASCII_CUT).split())
        if new and max(map(len, new)) > MAX_WORD:  # rare: cut only then
            new = {w[:MAX_WORD] for w in new}
        new -= seen
        total += sum(map(len, new))
        if total > MAX_DISTINCT_BYTES:
            return False
        seen |= new
        start = stop
    return True


@functools.lru_cache(maxsize=256)
def _ascii_term(term_words: tuple[str, ...], prefix: bool) -> re.Pattern[str]:
    """A term's words as a pattern over lowered ASCII text: its first word first (so that a
    search finds where it stands, in C), then each other word after a run of characters
    that are not letters or digits, its last begun for a prefix. What stands before the
    first word is left to the caller to check."""
    return re.compile(_ascii_words_pattern(term_words, prefix) + "(?![a-z0-9])")


def _bad(query: str, why: str, term: str | None = None) -> InvalidArgumentError:
    """The error for a query that cannot be read: a long query shown by its start, as ids
    are, so that the message stays one readable line. The ``term`` that is wrong is named
    after the query only when the query holds more than it: a query of that term alone is
    not named twice."""
    def shown(text: str) -> str:
        return repr(text if len(text) <= 60 else text[:40] + "...")

    term = None if term is None else term.strip()
    where = f" at {shown(term)}" if term is not None and term != query.strip() else ""
    return InvalidArgumentError(f"search query {shown(query)}{where}: {why}")


#: What the query language reads as a quote around a phrase: the ASCII ``"``, the curly and
#: low double quotes word processors and chat apps write (U+201C to U+201F: English
#: ``\u201c...\u201d``, German ``\u201e...\u201c``, Swedish ``\u201d...\u201d``), guillemets
#: (U+00AB, U+00BB) and the fullwidth U+FF02; any of them closes a phrase any of them
#: opened, as pasted text mixes them. Single curly quotes make a phrase too (opened by
#: U+2018, U+201A or U+201B, closed by U+2019 or U+2018), but only opened where a term begins
#: and closed before a space, a ``*`` or the end, since U+2019 is also the apostrophe inside
#: a word (``don\u2019t``); the ASCII ``'`` is not a quote.
DOUBLE_QUOTES = '"\u201c\u201d\u201e\u201f\uff02\u00ab\u00bb'
SINGLE_OPENING_QUOTES = "\u2018\u201a\u201b"
SINGLE_CLOSING_QUOTES = "\u2019\u2018"
#: What the query language reads as the minus that leaves a term out, where a term begins:
#: the ASCII ``-``, the minus sign U+2212, and the fullwidth and small hyphen-minus U+FF0D
#: and U+FE63 (dashes are punctuation: ``porto \u2014 hotel`` is two words).
MINUS_SIGNS = "-\u2212\uff0d\ufe63"
#: What the query language reads as the ``*`` that makes a word a prefix: the ASCII ``*``
#: and the fullwidth and small asterisks U+FF0A and U+FE61, which a Chinese or Japanese input
#: method types for it.
STARS = "*\uff0a\ufe61"

_CLOSES_SINGLE = rf"[{SINGLE_CLOSING_QUOTES}](?=[\s{STARS}]|\Z)"
# A term: an optional minus, then a phrase in double or single quotes (possibly unclosed)
# or a bare word, each with an optional trailing '*'.
_TERM = re.compile(
    rf"([{MINUS_SIGNS}]?)(?:"
    rf"[{DOUBLE_QUOTES}]([^{DOUBLE_QUOTES}]*)([{DOUBLE_QUOTES}]?)"
    rf"|[{SINGLE_OPENING_QUOTES}]((?:(?!{_CLOSES_SINGLE}).)*)({_CLOSES_SINGLE})?"
    rf"|([^\s{DOUBLE_QUOTES}]+))",
    re.DOTALL,
)


def parse(query: str) -> Query:
    """Read a query (see the module's documentation).

    Raises:
        InvalidArgumentError: the query is not a string, is empty or too long, has an
            unclosed quote, a ``*`` that does not end a word, no word at all (a term of
            punctuation or emoji alone is passed over), or only terms that exclude.
    """
    if not isinstance(query, str):
        raise InvalidArgumentError(f"a search query is a string, not {type(query).__name__}")
    if not query.strip():
        raise _bad(query, "it is empty; give one or more words to find")
    if len(query) > MAX_QUERY:
        raise _bad(query, f"it is longer than {MAX_QUERY} characters")
    terms: list[Term] = []
    at = 0
    while at < len(query):
        if query[at].isspace():
            at += 1
            continue
        found = _TERM.match(query, at)
        if found is None:  # a lone '-' before a space or the end
            raise _bad(
                query, "a '-' must be followed by the word or phrase to leave out",
                query[at:].split(None, 1)[0],  # the minus signs as typed (- or --)
            )
        minus, double, closing, single, single_closing, bare = found.groups()
        phrase = double if double is not None else single
        closing = closing if double is not None else single_closing
        at = found.end()
        if bare is not None and len(bare) == 1 and bare in MINUS_SIGNS:
            raise _bad(
                query, "a '-' must be followed by the word or phrase to leave out",
                query[found.start():at],  # the minus signs as typed (- or --)
            )
        if phrase is not None:
            if not closing:
                raise _bad(
                    query, 'a quote is not closed; phrases are written "like this"',
                    query[found.start():at],
                )
            body, star = phrase, False
            if at < len(query) and query[at] in STARS:
                star, at = True, at + 1
        else:
            body = bare
            star = body[-1] in STARS
            if star:
                body = body[:-1]
        has_star = any(c in body for c in STARS)
        if has_star and phrase is not None:
            raise _bad(
                query,
                "a phrase holds no '*'; one after its closing quote makes its last word a "
                'prefix, as in "hotel in port"*',
                query[found.start():at],
            )
        if has_star or (star and not body):
            raise _bad(query, "a '*' only ends a word, as in hot*", query[found.start():at])
        found_words = tuple(words(body))
        if found_words:  # a term of punctuation or emoji alone finds nothing: passed over
            terms.append(Term(found_words, star, bool(minus)))
    if not terms:
        raise _bad(query, "it holds no word to find (letters or digits)")
    if len(terms) > MAX_TERMS:
        raise _bad(query, f"it has {len(terms)} terms; at most {MAX_TERMS} are taken")
    if all(t.exclude for t in terms):
        raise _bad(query, "every term excludes; give at least one word to find")
    return Query(query, tuple(terms))


def snippet(text: str, query: Query, width: int = SNIPPET_WORDS) -> list[tuple[str, bool]]:
    """A short piece of ``text`` around the first place a query's found terms match there:
    ``(text, matched)`` pieces in order, ``matched`` for each word a one-word term finds
    and for each word of a phrase where the whole phrase stands (a phrase's word alone is
    not marked: ``京`` in ``京都`` is not when searching ``東京``). At most ``width`` words of
    context on each side; ``…`` marks words left out. The piece starts at a word, or at the
    punctuation right before it (:func:`_with_punctuation_before`); whitespace runs in it
    show as one space."""
    exact, prefixes, phrases = _matchers(query)
    if text.isascii():
        return _ascii_snippet(text, exact, prefixes, phrases, width)
    return _snippet_by_words(text, exact, prefixes, phrases, width)


def first_match(text: str, query: Query) -> int | None:
    """Where in ``text`` the first word a query's found terms match begins, as
    :func:`snippet` finds it (a phrase: its first word), or ``None`` when none stands there:
    where a page that shows part of a long text shows it from."""
    exact, prefixes, phrases = _matchers(query)
    if text.isascii():
        lowered = text.lower()
        found = (_matched_words(exact, prefixes).search(lowered),
                 _matched_phrases(phrases).search(lowered))
        return min((m.start() for m in found if m is not None), default=None)
    begin = _block_with_a_match(text, exact, prefixes, phrases)
    if begin is None:
        return None
    read: list[str] = []  # the folded words so far, and where the word each is of begins
    starts: list[int] = []
    for m in _raw_word().finditer(text, begin):
        for word in words(m.group()):
            read.append(word)
            starts.append(m.start())
            if word in exact or (prefixes and word.startswith(prefixes)):
                return m.start()
            for phrase in phrases:
                if phrase.stands_at(read, len(read) - len(phrase.words)):
                    return starts[-len(phrase.words)]
    return None


def first_match_as_written(text: str, query: Query) -> int | None:
    """:func:`first_match` of ``text`` as the search reads it (:func:`as_read`: a JSON
    document's strings with their escapes read, as tool-call arguments and a tool result
    are found), as a place in ``text`` as written: a word after ``\\n``, or written with
    ``\\u00fc``, is found where its escape stands."""
    read = as_read(text)
    at = first_match(read, query)
    if at is None or read is text:
        return at
    shift = 0  # how much longer ``text`` is than ``read`` before the escape at hand
    for escape in _JSON_ESCAPE.finditer(text):
        if escape.start() - shift >= at:
            break
        written = escape.end() - escape.start()
        shift += written - len(_unescaped(escape))
        if escape.end() - shift > at:  # the word begins inside what the escape stands for
            return escape.start()
    return at + shift


def _block_with_a_match(
    text: str, exact: frozenset[str], prefixes: tuple[str, ...], phrases: tuple[Term, ...]
) -> int | None:
    """Where :func:`first_match`'s word-by-word reading of ``text`` may start and find what
    it finds from the text's start: the start of the first block of about :data:`_FOLD_BLOCK`
    characters where a match ends (or of an earlier one, for the first words of a phrase
    that ends there); ``None`` when no block holds one, so that the reading would find
    nothing. Each block is folded at once and a match's last word looked for in it, in C;
    only where one stands are its words cut (:func:`_words_as_written`), never a text of
    megabytes a word at a time, which takes seconds."""
    needles = (*exact, *prefixes, *(t.words[-1] for t in phrases))
    keep = max((len(t.words) for t in phrases), default=1) - 1
    starts: list[int] = []  # where each block read before begins
    start = 0
    while start < len(text):
        end = _not_in_a_word(text, min(len(text), start + _FOLD_BLOCK), forward=True)
        folded = fold(text[start:end])
        if any(w in folded for w in needles):
            before: list[str] = []  # the words a phrase ending here may begin with
            begin, back = start, len(starts)
            while len(before) < keep and back:
                back -= 1
                before = _words_as_written(text, starts[back], begin) + before
                begin = starts[back]
            if _holds(before + _words_as_written(text, start, end), exact, prefixes, phrases):
                return begin
        starts.append(start)
        start = end
    return None


def _words_as_written(text: str, start: int, end: int) -> list[str]:
    """The words of ``text[start:end]`` (which starts and ends between words as written) as
    :func:`first_match` reads them, :func:`words` of each word as written in turn: those
    words joined by a line break, which stands between words and so folds as they do
    alone, folded and cut at once."""
    folded = fold("\n".join(_raw_word().findall(text, start, end)))
    return [w[:MAX_WORD] for w in _WORD.findall(folded)]


def _matchers(query: Query) -> tuple[frozenset[str], tuple[str, ...], tuple[Term, ...]]:
    """A query's found terms as a snippet matches them: its whole words, its prefixes and
    its phrases."""
    single = [t for t in query.found if len(t.words) == 1]
    exact = frozenset(t.words[0] for t in single if not t.prefix)
    prefixes = tuple(t.words[0] for t in single if t.prefix)
    return exact, prefixes, tuple(t for t in query.found if len(t.words) > 1)


def _snippet_by_words(
    text: str,
    exact: frozenset[str],
    prefixes: tuple[str, ...],
    phrases: tuple[Term, ...],
    width: int,
) -> list[tuple[str, bool]]:
    """:func:`snippet` of any text, a word at a time: each word is folded and looked up. A
    Chinese or Japanese character counts as a third of a word in the window (their words
    are one to three characters long): eight words of context are 24 of them."""
    room = width * _WORD_THIRDS
    longest = max((len(t.words) for t in phrases), default=1)
    begin = _block_before_a_match(text, exact, prefixes, phrases, width)
    spans: list[tuple[int, int]] = []
    thirds: list[int] = []  # each word's share of the window, in thirds of a word
    found: list[str] = []  # the folded words so far, and the span each belongs to
    owner: list[int] = []
    marked: set[int] = set()  # the spans a term finds
    after = extra = 0
    for m in _raw_word().finditer(text, begin):
        start, end = m.span()
        at = len(spans)
        counting = bool(marked)  # the window's words after the first match are counted
        spans.append((start, end))
        unspaced = end - start == 1 and _UNSPACED_CHAR.match(text, start)
        thirds.append(1 if unspaced else _WORD_THIRDS)
        for word in words(text[start:end]):
            found.append(word)
            owner.append(at)
            if word in exact or (prefixes and word.startswith(prefixes)):
                marked.add(at)
            for phrase in phrases:
                if phrase.stands_at(found, len(found) - len(phrase.words)):
                    marked.update(owner[-len(phrase.words) :])
        if counting:
            after += thirds[-1]
            # One word past the window is enough to know more follows, and a phrase that
            # began inside it needs its last words.
            if after > room:
                extra += 1
                if extra >= longest:
                    break
    if not spans:
        return _no_words(text)
    at = min(marked, default=0)  # a phrase found later may have begun first
    lo, taken = at, 0
    while lo > 0 and taken + thirds[lo - 1] <= room:
        lo, taken = lo - 1, taken + thirds[lo - 1]
    hi, taken = at + 1, 0
    while hi < len(spans) and taken + thirds[hi] <= room:
        hi, taken = hi + 1, taken + thirds[hi]
    shown = [spans[i] for i in range(lo, hi) if i in marked]
    cut_before = lo > 0 or (begin > 0 and _raw_word().search(text, 0, begin) is not None)
    return _pieces(text, spans[lo][0], spans[hi - 1][1], shown, cut_before, hi < len(spans))


#: The characters :func:`_block_before_a_match` folds at a time, and how far before the
#: first block holding a match :func:`_context_start` first looks for a snippet's words of
#: context (four times as far again while too few words stand there).
_FOLD_BLOCK = 8192
_CONTEXT = 4 * (MAX_WORD + 1) * SNIPPET_WORDS


def _block_before_a_match(
    text: str,
    exact: frozenset[str],
    prefixes: tuple[str, ...],
    phrases: tuple[Term, ...],
    width: int,
) -> int:
    """Where in ``text`` a snippet's word-by-word reading may start: before the first block
    of about :data:`_FOLD_BLOCK` characters whose words (folded a block at once, far faster than
    a word at a time) hold a one-word term or a phrase, far enough back for ``width`` words
    of context; 0 for a short text, or when no block does (the reading then finds the
    text's first words). A block ends between words, and is read on for the words a phrase
    that begins in it may take, wherever they stand."""
    if len(text) <= 2 * _FOLD_BLOCK:
        return 0
    needles = (*exact, *prefixes)
    longest = max((len(t.words) for t in phrases), default=1)
    word = _raw_word()
    start = 0
    while start < len(text):
        end = _not_in_a_word(text, min(len(text), start + _FOLD_BLOCK), forward=True)
        reach = end
        for found in itertools.islice(word.finditer(text, end), longest - 1):
            reach = found.end()
        folded = fold(text[start:reach])
        # A term's words are in the block's folded text before they are among its words:
        # the words are cut only from a block where a one-word term's is, or every word of
        # a phrase (its first alone is often a common word, in every block). Cut from the
        # block folded at once, they may join where the reading's do not (``Acme™Pro``
        # folds to ``acmetmpro``, where the reading finds ``pro``): a block they do not
        # hold a term in is cut again as the reading cuts it, a word as written at a time.
        # (One they hold a term in that the reading does not only starts the reading early.)
        if (
            any(w in folded for w in needles)
            or any(all(w in folded for w in t.words) for t in phrases)
        ) and (
            _holds([w[:MAX_WORD] for w in _WORD.findall(folded)], exact, prefixes, phrases)
            or _holds(_words_as_written(text, start, reach), exact, prefixes, phrases)
        ):
            return _context_start(text, start, width * _WORD_THIRDS + 1)
        start = end
    return 0


def _context_start(text: str, start: int, words_before: int) -> int:
    """A place before ``start``, between words, with at least ``words_before`` words between
    them (or the text's start): the room a snippet's context needs, however long the words
    and what separates them."""
    span = _CONTEXT
    while True:
        before = _not_in_a_word(text, max(0, start - span), forward=False)
        held = itertools.islice(_raw_word().finditer(text, before, start), words_before)
        if before == 0 or sum(1 for _ in held) >= words_before:
            return before
        span = 4 * max(span, start - before)  # past the word ``before`` stands at


def _not_in_a_word(text: str, at: int, *, forward: bool) -> int:
    """``at``, or the nearest place after it (``forward``) or before it that is not inside a
    word as written (:func:`_raw_word`). Found by a pattern's run, in C: a word can be
    megabytes long (a hex dump, a line of Thai), which a step a character reads for seconds."""
    inside = _within_a_word()
    if not (0 < at < len(text) and inside.match(text, at - 1) and inside.match(text, at)):
        return at
    if forward:
        return at + _word_run_length(text, at)
    span = _CONTEXT
    while True:  # the run of word characters that ends at ``at``, read in the text reversed
        low = max(0, at - span)
        behind = text[low:at][::-1]
        run = _word_run_length(behind, 0)
        if run < len(behind) or low == 0:
            return at - run
        span *= 4


def _word_run_length(text: str, at: int) -> int:
    """How many characters from ``at`` on belong to a word as written (:func:`_within_a_word`):
    a run of letters, digits, ``_`` and characters folding deletes, cut at its first ``_``
    and its first character of :data:`_UNSPACED`."""
    found = _word_characters().match(text, at)  # a run of none is a match too
    end = at if found is None else found.end()
    underscore = text.find("_", at, end)
    end = end if underscore < 0 else underscore
    unspaced = _UNSPACED_WORD.search(text, at, end)
    return (end if unspaced is None else unspaced.start()) - at


def _holds(
    held: list[str], exact: frozenset[str], prefixes: tuple[str, ...], phrases: tuple[Term, ...]
) -> bool:
    """Whether a block's words ``held`` hold a one-word term or a phrase."""
    if not exact.isdisjoint(held) or (prefixes and any(w.startswith(prefixes) for w in held)):
        return True
    present = frozenset(held)
    return any(phrase.found_in(held, present) for phrase in phrases)


@functools.cache
def _marks_and_format() -> str:
    """The characters folding deletes (:func:`_is_left_out`), as ranges of a regular
    expression's class. Looked up in the Unicode database once, when a snippet first reads
    text that is not ASCII."""
    ranges: list[tuple[int, int]] = []
    for code in (*range(0xAD, 0x20000), *range(0xE0000, 0xE01F0)):
        if _deleted_by_fold(chr(code)):  # not the cached lookup: each is asked once
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


@functools.cache
def _within_a_word() -> re.Pattern[str]:
    """A character that belongs to a word as written: a letter or digit, or a character
    folding deletes inside one. Not a character of :data:`_UNSPACED`, a word alone: a place
    between two of them is between words."""
    return re.compile(f"[^\\W_{_UNSPACED}]|[{_marks_and_format()}]")


@functools.cache
def _word_characters() -> re.Pattern[str]:
    """A run of letters, digits, ``_`` and characters folding deletes (empty where none
    stands): one character class, which a pattern reads fastest; :func:`_word_run_length`
    cuts it where a word as written ends."""
    return re.compile(f"[\\w{_marks_and_format()}]*")


@functools.cache
def _raw_word() -> re.Pattern[str]:
    """A word of text as written, for a snippet: a letter or digit and the letters, digits,
    combining marks and invisible format characters after it (so ``Zu\u0308rich``,
    decomposed as macOS writes it, Hindi and Thai with their vowel signs, a word with a soft
    hyphen, are one word each, as they fold to one), or one character of
    :data:`_UNSPACED`. Made once, when a snippet first reads text that is not ASCII: the
    characters are looked up in the Unicode database."""
    marks = _marks_and_format()
    return re.compile(rf"(?![\W_])[{_UNSPACED}]|[^\W_{_UNSPACED}](?:[^\W_{_UNSPACED}]|[{marks}])*")


@functools.cache
def _long_word_as_written() -> re.Pattern[str]:
    """A word as written (:func:`_raw_word`) longer than :data:`SNIPPET_PIECE` characters:
    its marks count, so that a word of decomposed accents, or a line of Thai (whose vowel
    and tone marks stand between its letters, and whose words no space separates), is cut
    as a word of letters alone is."""
    marks = _marks_and_format()
    return re.compile(
        rf"[^\W_{_UNSPACED}](?:[^\W_{_UNSPACED}]|[{marks}]){{{SNIPPET_PIECE},}}"
    )


def _ascii_snippet(
    text: str,
    exact: frozenset[str],
    prefixes: tuple[str, ...],
    phrases: tuple[Term, ...],
    width: int,
) -> list[tuple[str, bool]]:
    """:func:`snippet` of ASCII text (what agents mostly say), which folds by lowering: the
    matched words are found by patterns, in C, and only the window's words are cut."""
    lowered = text.lower()
    pattern = _matched_words(exact, prefixes)
    at_phrase = _matched_phrases(phrases)
    first = pattern.search(lowered)
    first_phrase = at_phrase.search(lowered)
    if first_phrase is not None and (first is None or first_phrase.start() < first.start()):
        first = _ASCII_WORD.match(text, first_phrase.start())
    word = first or _ASCII_WORD.search(text)  # nothing matched: the text's first words
    if word is None:
        return _no_words(text)
    start = word.start()
    before = [] if first is None else _words_before(lowered, start, width + 1)
    kept = before[max(0, len(before) - width) :]
    window_start = kept[0][0] if kept else start
    window = _words_from(width).match(text, start)
    assert window is not None  # it starts at a word
    end = window.end()
    marked = {m.span() for m in pattern.finditer(lowered, window_start, end)}
    for found in at_phrase.finditer(lowered, window_start, end):
        phrase_end = found.end(1)
        marked.update(
            w.span() for w in _ASCII_WORD.finditer(lowered, found.start(), min(phrase_end, end))
        )
    cut_after = _ASCII_WORD.search(text, end) is not None
    return _pieces(text, window_start, end, sorted(marked), len(before) > width, cut_after)


@functools.lru_cache(maxsize=16)
def _words_from(count: int) -> re.Pattern[str]:
    """A pattern that, matched at an ASCII word, takes it and at most ``count`` words after."""
    return re.compile(rf"[A-Za-z0-9]+(?:[^A-Za-z0-9]+[A-Za-z0-9]+){{0,{count}}}")


def _words_before(lowered: str, at: int, count: int) -> list[tuple[int, int]]:
    """The spans of at most ``count`` ASCII words that end before ``at``, in text order:
    found in the reversed text, from a little before ``at`` (the whole text only when
    that piece holds too few whole words)."""
    begin = max(0, at - (MAX_WORD + 1) * count)
    while True:
        backwards = lowered[begin:at][::-1]
        found = [m.span() for m in itertools.islice(_ASCII_WORD.finditer(backwards), count)]
        cut = begin > 0 and (
            len(found) < count or (found[-1][1] == len(backwards) and lowered[begin - 1].isalnum())
        )
        if not cut:
            return [(at - e, at - s) for s, e in reversed(found)]
        begin = 0


def _pieces(
    text: str,
    start: int,
    end: int,
    marked: Sequence[tuple[int, int]],
    cut_before: bool,
    cut_after: bool,
) -> list[tuple[str, bool]]:
    """``text[start:end]`` as snippet pieces: the ``marked`` spans (words, in order) marked,
    those with nothing between them as one piece, the rest with whitespace runs as one
    space; a word longer than :data:`SNIPPET_PIECE` characters cut there, and the text
    between two words longer than that cut in its middle, each with ``…``; ``…`` before it
    when ``cut_before``, after it when ``cut_after``, else what follows its last word
    (punctuation, a closing quote)."""
    pieces: list[tuple[str, bool]] = []

    def plain(piece: str) -> None:
        if pieces and not pieces[-1][1]:
            pieces[-1] = (pieces[-1][0] + piece, False)
        elif piece:
            pieces.append((piece, False))

    if cut_before:
        plain("…")
    at = start = _with_punctuation_before(text, start)
    for s, e in marked:
        word = text[s : s + len(_upto(text[s:e], SNIPPET_PIECE))]
        if s == at and pieces and pieces[-1][1]:  # words written without a space: one mark
            pieces[-1] = (pieces[-1][0] + word, True)
        else:
            plain(_bounded(_SPACES.sub(" ", text[at:s])))
            pieces.append((word, True))
        if e - s > SNIPPET_PIECE:
            plain("…")
        at = e
    plain(_bounded(_SPACES.sub(" ", text[at:end])))
    if cut_after:
        plain("…")
        return pieces
    rest = _upto(_on_one_line(text, end, 20 + _LONGEST_CHARACTER), 20)
    if rest and text[end].isspace():  # "porto 😀", not "porto😀"
        rest = " " + rest
    plain(rest)
    return pieces


#: The most punctuation a snippet shows before its first word (:func:`_with_punctuation_before`).
LEADING_PUNCTUATION = 8


def _with_punctuation_before(text: str, start: int) -> int:
    """Where a snippet whose first word begins at ``start`` starts: before the punctuation
    that stands right before that word, when a space or the text's start stands before it
    and it is at most :data:`LEADING_PUNCTUATION` characters (``{"``, ``("``, an opening
    quote), so that the snippet begins where a token does: ``{"city": "porto"``, not
    ``city": "porto"``; else at the word."""
    at = start
    while at > 0 and start - at < LEADING_PUNCTUATION:
        before = text[at - 1]
        if before.isspace() or before.isalnum():
            break
        at -= 1
    return at if at == 0 or text[at - 1].isspace() else start


_NOT_SPACE = re.compile(r"\S+")


def _on_one_line(text: str, at: int, most: int) -> str:
    """At least the first ``most`` characters (or all) of ``text[at:]`` without its leading
    whitespace and with each run of whitespace as one space, read no further than they
    stand: what follows a snippet's last word can be megabytes (of punctuation, emoji), not
    to be cut into a string a piece."""
    parts: list[str] = []
    taken = 0
    for found in _NOT_SPACE.finditer(text, at):
        part = text[found.start() : min(found.end(), found.start() + most)]
        parts.append(part)
        taken += len(part) + 1
        if taken > most:
            break
    return " ".join(parts)


def _bounded(piece: str) -> str:
    """Unmarked snippet text with each word longer than :data:`SNIPPET_PIECE` cut there and
    each stretch between words longer than that cut in its middle (with ``…``)."""
    if len(piece) <= SNIPPET_PIECE:  # the usual piece: nothing in it can be that long
        return piece
    half = SNIPPET_PIECE // 2

    def middle_left_out(gap: str) -> str:
        return f"{_upto(gap, half)}…{gap[_whole_from(gap, len(gap) - (half - 1)):]}"

    piece = _LONG_GAP.sub(lambda m: middle_left_out(m.group()), piece)
    long_word = _LONG_WORD if piece.isascii() else _long_word_as_written()
    return long_word.sub(lambda m: f"{_upto(m.group(), SNIPPET_PIECE)}…", piece)


def _upto(text: str, at: int) -> str:
    """``text[:at]``, cut between whole characters as a reader sees them
    (:func:`_whole_from`)."""
    return text[: _whole_from(text, at)]


#: The most code points a cut moves back to keep a character whole: a family emoji is seven,
#: a letter with its marks a few; a longer run (stacked marks, "Zalgo" text) is cut anyway.
_LONGEST_CHARACTER = 16


def _whole_from(text: str, at: int) -> int:
    """``at``, or the place before it where the character a reader sees begins: never
    between a letter and its combining marks, around a zero-width joiner (an emoji family),
    before a skin tone, or between the two regional indicators of a flag (at most
    :data:`_LONGEST_CHARACTER` code points back)."""
    cut = at
    while 0 < at < len(text) and (
        text[at - 1] == "\u200d" or _joins_the_one_before(text[at])
    ):
        at -= 1
        if cut - at > _LONGEST_CHARACTER:
            return cut
    if 0 < at < len(text) and _is_flag_half(text[at]) and _is_flag_half(text[at - 1]):
        run = at
        while run > 0 and _is_flag_half(text[run - 1]):
            run -= 1
        at -= (at - run) % 2
    return at


def _joins_the_one_before(char: str) -> bool:
    return _is_left_out(char) or "\U0001f3fb" <= char <= "\U0001f3ff"  # marks; skin tones


def _is_flag_half(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"  # a regional indicator


def _no_words(text: str) -> list[tuple[str, bool]]:
    """The snippet of a text without a word: its start, on one line."""
    short = " ".join(text.split())
    return [(short[:120], False)] if short else []


def _ascii_word_pattern(word: str, prefix: bool = False) -> str:
    """A word of a query as a pattern over lowered ASCII text: a word of :data:`MAX_WORD`
    characters finds any word it begins, as words are cut there."""
    return re.escape(word) + ("[a-z0-9]*" if prefix or len(word) >= MAX_WORD else "")


def _ascii_words_pattern(term_words: Sequence[str], prefix: bool) -> str:
    """A term's words as a pattern over lowered ASCII text: each after a run of characters
    that are not letters or digits, its last begun for a prefix."""
    last = len(term_words) - 1
    return "[^a-z0-9]+".join(
        _ascii_word_pattern(w, prefix and i == last) for i, w in enumerate(term_words)
    )


@functools.lru_cache(maxsize=256)
def _matched_phrases(phrases: tuple[Term, ...]) -> re.Pattern[str]:
    """A pattern matching, at each place a phrase of ``phrases`` begins in lowered ASCII
    text, an empty string whose group 1 is the phrase (a lookahead, so that one phrase's
    places can overlap)."""
    alternatives = [_ascii_words_pattern(t.words, t.prefix) for t in phrases]
    if not alternatives:
        return re.compile(r"(?!)")
    return re.compile(r"(?<![a-z0-9])(?=((?:" + "|".join(alternatives) + r")(?![a-z0-9])))")


@functools.lru_cache(maxsize=256)
def _matched_words(exact: frozenset[str], prefixes: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern finding, in lowered ASCII text, the whole words a query's found terms hold:
    a word of ``exact`` (or, for one of :data:`MAX_WORD` characters, any word it begins,
    as words are cut there), or a word starting with one of ``prefixes``."""
    alternatives = [
        *(_ascii_word_pattern(w) for w in sorted(exact)),
        *(_ascii_word_pattern(p, prefix=True) for p in prefixes),
    ]
    if not alternatives:
        return re.compile(r"(?!)")
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(alternatives) + r")(?![a-z0-9])")


__all__ = [
    "DOUBLE_QUOTES",
    "MAX_QUERY",
    "MAX_TERMS",
    "MAX_WORD",
    "MINUS_SIGNS",
    "SINGLE_CLOSING_QUOTES",
    "SINGLE_OPENING_QUOTES",
    "SNIPPET_WORDS",
    "Query",
    "Term",
    "first_match",
    "first_match_as_written",
    "fold",
    "index_text",
    "message_text",
    "parse",
    "snippet",
    "tool_name",
    "tool_names",
    "words",
]
