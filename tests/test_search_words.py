"""The words a message is found by, against the definition written out here on its own:
case folded, NFKD without combining marks, Hangul syllables composed again, runs of Unicode
letters and digits (``_`` and everything else between words), each cut to 64 characters;
and what a query's terms match and a hit's snippet shows, against definitions written out
here a word at a time."""

from __future__ import annotations

import json
import re
import tracemalloc
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_store import testing
from agui_store.history import search as search_rules

WORD = re.compile(r"[^\W_]+")
#: Letters of the scripts written without spaces (Chinese and Japanese), each a word alone:
#: told by their Unicode names.
UNSPACED_NAMES = (
    "CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH", "HIRAGANA", "KATAKANA",
    "HENTAIGANA", "HANGZHOU NUMERAL", "IDEOGRAPHIC ITERATION MARK", "IDEOGRAPHIC CLOSING MARK",
    "IDEOGRAPHIC NUMBER ZERO", "VERTICAL IDEOGRAPHIC ITERATION MARK",
)


def unspaced(char: str) -> bool:
    return unicodedata.name(char, "").startswith(UNSPACED_NAMES)


#: Latin letters no decomposition takes apart, as the search guide lists them.
PLAIN = {"ł": "l", "ø": "o", "đ": "d", "ð": "d", "ħ": "h", "ŧ": "t", "ŀ": "l", "\u0131": "i",
         "æ": "ae", "œ": "oe", "þ": "th"}


#: A Hangul syllable as NFKD writes it: a leading consonant, a vowel, and maybe a final
#: consonant (conjoining jamo).
HANGUL_SYLLABLE = re.compile("([\u1100-\u1112])([\u1161-\u1175])([\u11a8-\u11c2]?)")


def hangul_syllable(jamo: re.Match[str]) -> str:
    """The syllable of U+AC00 to U+D7A3 its jamo spell (Unicode's composition, chapter 3.12)."""
    lead, vowel, final = jamo.groups()
    index = (ord(lead) - 0x1100) * 21 + ord(vowel) - 0x1161
    return chr(0xAC00 + index * 28 + (ord(final) - 0x11A7 if final else 0))


def defined_words(text: str) -> list[str]:
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    kept = "".join(PLAIN.get(c, c) for c in decomposed
                   if not unicodedata.category(c).startswith("M")
                   and (unicodedata.category(c) != "Cf" or c == "\u200b"))
    kept = HANGUL_SYLLABLE.sub(hangul_syllable, kept)
    words = []
    for run in WORD.findall(kept):
        word = ""
        for char in run:
            if unspaced(char):
                words += [word, char] if word else [char]
                word = ""
            else:
                word += char
        if word:
            words.append(word)
    return [w[:64] for w in words]


def found_by(text: str) -> list[str]:
    return testing.search_words({"id": "m", "role": "user", "content": text})


def given_to_the_index(text: str) -> list[str]:
    return testing.search_index_words({"id": "m", "role": "user", "content": text})


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_is_cut_into_the_defined_words(text: str) -> None:
    assert found_by(text) == defined_words(text)


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"])))
def test_any_text_is_cut_into_the_defined_words(text: str) -> None:
    assert found_by(text) == defined_words(text)


@given(st.text(alphabet=st.characters(max_codepoint=127)) | st.text())
def test_the_index_is_given_the_defined_words_of_any_text(text: str) -> None:
    assert given_to_the_index(text) == defined_words(text)


@given(st.lists(st.tuples(
    st.integers(1, 70), st.sampled_from(["a", "B", "9", "é"]), st.sampled_from([" ", "_", "-."])
), max_size=6))
def test_the_index_is_given_long_words_cut_as_the_definition_cuts_them(
    words: list[tuple[int, str, str]],
) -> None:
    text = "".join(letter * n + between for n, letter, between in words)
    assert given_to_the_index(text) == defined_words(text)


def within_a_budget(words: list[str], budget: int) -> list[str]:
    """``words`` up to the first one whose first occurrence takes the distinct words past
    ``budget`` bytes of UTF-8."""
    seen: set[str] = set()
    for at, word in enumerate(words):
        if word not in seen:
            seen.add(word)
            if sum(len(w.encode("utf-8", "surrogatepass")) for w in seen) > budget:
                return words[:at]
    return words


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(alphabet=st.sampled_from("ab \n\u00e9\u0301\u6771\u4eac-_Z9\u00a0\u3000")),
    st.integers(1, 12),
    st.integers(0, 40),
)
def test_a_long_text_read_a_block_at_a_time_gives_the_defined_words_within_their_budget(
    monkeypatch: pytest.MonkeyPatch, text: str, block: int, budget: int
) -> None:
    """A text of many blocks (a file a tool read) is cut into words a block at a time; tiny
    blocks and budgets here stand for the megabytes of each."""
    monkeypatch.setattr(search_rules, "_BLOCK", block)
    monkeypatch.setattr(search_rules, "MAX_DISTINCT_BYTES", budget)
    expected = within_a_budget(defined_words(text), budget)
    assert search_rules.words(text) == expected
    assert search_rules.index_text(text).split() == expected


def test_case_accents_and_underscores_fold_as_a_reader_expects() -> None:
    assert found_by("Café CAFÉ naïve Straße ﬁle refund_order e-mail 東京タワー") == [
        "cafe", "cafe", "naive", "strasse", "file", "refund", "order", "e", "mail",
        "東", "京", "タ", "ワ", "ー",
    ]
    # Chinese and Japanese a character a word, beside words of other scripts; Korean whole,
    # by its syllables, however they are written (decomposed, as macOS writes file names).
    assert found_by("API调用失败了 ｶﾀｶﾅ 々木 서울에서") == [
        "api", "调", "用", "失", "败", "了", "カ", "タ", "カ", "ナ", "々", "木", "서울에서",
    ]
    assert found_by(unicodedata.normalize("NFD", "서울에서 석사")) == ["서울에서", "석사"]
    # Letters that decompose to capitals fold as their plain ones.
    assert found_by("𝐇𝐞𝐥𝐥𝐨 ℍotel 25℃ ＡＢＣ Ⅻ ᴴᴵ") == [  # noqa: RUF001
        "hello", "hotel", "25", "c", "abc", "xii", "hi",
    ]
    # Letters with a stroke or a ligature as typed without them; invisible characters
    # (a soft hyphen, a zero-width space) inside a word leave it whole.
    assert found_by("Łódź København Đồng Æsir Þór hy\u00adphen join\u2060ed zero\u200bwidth") == [
        "lodz", "kobenhavn", "dong", "aesir", "thor", "hyphen", "joined", "zero", "width",
    ]
    assert found_by("x" * 70) == ["x" * 64]
    assert given_to_the_index("Word " + "x" * 70 + " y" * 64) == ["word", "x" * 64, *"y" * 64]


@given(st.text(alphabet=st.sampled_from(
    "서울석사우 \u1109\u1165\u110b\u116e\u11af\u11a8\u3145\u3153\u0301\u00adÉa_"
)))
def test_korean_is_cut_into_words_of_whole_syllables_however_it_is_written(text: str) -> None:
    """Syllables (U+AC00 to U+D7A3), their conjoining jamo as NFD writes them, compatibility
    jamo (which NFKD makes conjoining ones) and a mark or a soft hyphen between them."""
    assert found_by(text) == defined_words(text)
    assert given_to_the_index(text) == defined_words(text)


def test_a_korean_prefix_finds_the_words_beginning_with_its_syllables() -> None:
    def matches(query: str, text: str) -> bool:
        return testing.search_matches(query, {"id": "m", "role": "user", "content": text})

    assert matches("서우*", "서우 친구") and not matches("서우*", "서울에서")
    assert matches("서*", "서울에서") and not matches("서*", "석사")
    assert matches("석*", unicodedata.normalize("NFD", "석사 학위"))
    assert testing.search_snippet("석사 학위, 서울에서 만나요", "서*") == [
        ("석사 학위, ", False), ("서울에서", True), (" 만나요", False),
    ]


def defined_snippet(text: str, query: str) -> list[tuple[str, bool]]:
    """A snippet as the search guide documents it, word by word: from the first word a term
    finds (else the text's first word), up to 8 words each side (a Chinese or Japanese
    character counts a third of one), ``…`` where words are left out, whitespace runs as
    one space, and after the last word, when no word is left out after it, what follows it
    (punctuation, a closing quote). A word shows its first 64 characters, then ``…``; the
    text between two words longer than 64 characters its first 32 and last 31 around
    ``…``. Marked: each word a one-word term finds, and each word of a phrase where the
    whole phrase stands; marked words with nothing between them are one piece."""
    terms = [
        (defined_words(t.strip('"*')), t.endswith("*"))
        for t in re.findall(r'-?"[^"]*"\*?|[^\s"]+', query)
        if not t.startswith("-")
    ]
    exact = {ws[0] for ws, prefix in terms if len(ws) == 1 and not prefix}
    prefixes = tuple(ws[0] for ws, prefix in terms if len(ws) == 1 and prefix)
    phrases = [(ws, prefix) for ws, prefix in terms if len(ws) > 1]
    spans = []
    for m in WORD.finditer(text):
        start = m.start()
        for at in range(m.start(), m.end()):
            if unspaced(text[at]):
                spans += [(start, at), (at, at + 1)] if start < at else [(at, at + 1)]
                start = at + 1
        if start < m.end():
            spans.append((start, m.end()))
    weight = [1 / 3 if unspaced(text[s]) and e == s + 1 else 1 for s, e in spans]
    if not spans:
        return [(" ".join(text.split())[:120], False)] if text.split() else []

    def found(start: int, end: int) -> bool:
        return any(w in exact or w.startswith(prefixes) for w in defined_words(text[start:end]))

    marked = {i for i, span in enumerate(spans) if found(*span)}
    flat = [(i, w) for i, span in enumerate(spans) for w in defined_words(text[slice(*span)])]
    for wanted, prefix in phrases:
        for at in range(len(flat) - len(wanted) + 1):
            here = [w for _, w in flat[at : at + len(wanted)]]
            if here[:-1] == wanted[:-1] and (
                here[-1] == wanted[-1] or (prefix and here[-1].startswith(wanted[-1]))
            ):
                marked |= {i for i, _ in flat[at : at + len(wanted)]}
    first = min(marked, default=0)
    lo = first
    while lo > 0 and sum(weight[lo - 1 : first]) <= 8 + 1e-9:
        lo -= 1
    hi = first + 1
    while hi < len(spans) and sum(weight[first + 1 : hi + 1]) <= 8 + 1e-9:
        hi += 1
    pieces = [("…", False)] if lo > 0 else []
    # The punctuation right before the first word, when a space or the start is before it.
    lead = re.search(r"(?:^|(?<=\s))(?:(?!\s)[\W_]){1,8}\Z", text[: spans[lo][0]])
    pieces.append(("" if lead is None else lead.group(), False))
    for i in range(lo, hi):
        if i > lo:
            gap = re.sub(r"\s+", " ", text[spans[i - 1][1] : spans[i][0]])
            pieces.append((gap if len(gap) <= 64 else f"{gap[:32]}…{gap[-31:]}", False))
        word = text[slice(*spans[i])]
        pieces.append((word[:64], i in marked))
        pieces.append(("…" if len(word) > 64 else "", False))
    rest = text[spans[hi - 1][1] :]
    after = " ".join(rest.split())[:20]
    after = " " + after if after and rest[0].isspace() else after  # "porto 😀", not "porto😀"
    pieces.append(("…" if hi < len(spans) else after, False))
    merged: list[tuple[str, bool]] = []
    for piece, mark in pieces:
        if not piece:
            continue
        if merged and mark == merged[-1][1]:
            merged[-1] = (merged[-1][0] + piece, mark)
        else:
            merged.append((piece, mark))
    return merged


PIECES = [
    "porto", "Porto", "hotel", "HOT", "hotels", "the", "9", "café", "x" * 64, "x" * 70,
    "東京", "東京タワー", "京", "서울에서", "서우", unicodedata.normalize("NFD", "석사"),
]
FILLER = ["w", "zz", "y7", "Q", "z" * 70, "日本", "の", "ホテル"]
BETWEEN = [" ", "  ", "\n\t", "_", ", ", " (", "-", "é ", "", "_" * 70, " ," * 40, "-\n" * 33]
QUERIES = [
    "porto", "hotel", "hot*", '"porto hotel"', "cafe", "x" * 64, "x*", "the -porto", "9",
    "東京", "京*", '"porto hot"*', '"the porto" hotel', "東京タワー", '"porto porto"', "京 東京",
    "서*", "서우*", '"서우 서울에서"', "석사",
]


@settings(max_examples=300)  # cheap, and the window's edges need the right word counts
@given(
    st.lists(st.tuples(st.sampled_from(FILLER), st.sampled_from(BETWEEN)), max_size=12),
    st.lists(st.tuples(st.sampled_from(PIECES + FILLER), st.sampled_from(BETWEEN)), max_size=30),
    st.sampled_from(QUERIES),
)
def test_a_snippet_shows_the_words_around_the_first_match_as_defined(
    lead: list[tuple[str, str]], parts: list[tuple[str, str]], query: str
) -> None:
    text = "".join(word + between for word, between in lead + parts)
    assert testing.search_snippet(text, query) == defined_snippet(text, query)


@pytest.mark.parametrize("query", ["needle", "need*", '"ipsum needle"', '"needle lorem"',
                                   "lorem", "absent"])
def test_a_snippet_of_a_long_text_that_is_not_ascii_is_the_defined_one(query: str) -> None:
    # Long enough to be read a block at a time; a phrase across two blocks is found too.
    text = "lörem ipsüm " * 1400 + "needle " + "lörem ipsüm " * 4000 + "the end"
    assert len(text) > 60_000
    assert testing.search_snippet(text, query) == defined_snippet(text, query)


def _long_texts() -> dict[str, tuple[str, str]]:
    """Long texts where reading a block at a time could go wrong, each with a query."""
    cut = 16_384
    no_space = "é," * ((cut - 3) // 2)
    late = "é," * 10_000 + "hotel," + "é," * 10_000 + "end"
    at = cut - 4 * 65 * 8
    late = late[: at - 2] + "zzhotel" + late[at + 5 :]  # a word that ends in "hotel"
    phrase_head = "lörem ipsüm " * (8180 // 12)
    phrase_head += "é" * (8192 - 5 - len(phrase_head) - 1) + " "
    return {
        "a match across where a block would be cut": (
            no_space + "hotel," + "é," * 20_000 + "hotel,end", "hotel"),
        "the end of a longer word where the reading would begin": (late, "hotel"),
        "long words before a late match": (
            " ".join("é" * 1000 for _ in range(20)) + " hotel end", "hotel"),
        "long gaps before a late match": (("é" + " " * 400) * 60 + "hotel end", "hotel"),
        "a phrase across a block's end, its words far apart": (
            phrase_head + "porto" + " " * 300 + "hotel " + "lörem ipsüm " * 3000
            + "porto hotel end", '"porto hotel"'),
        # "™" is no word's letter, but a block folded at once reads "acmetmpro" of it.
        "a word joined to the one before by a sign that folds to letters": (
            "lörem ipsüm " * 2000 + "the Acme™Pro ships " + "lörem ipsüm " * 2000
            + "a pro end", "pro"),
    }


@pytest.mark.parametrize("case", list(_long_texts()))
def test_a_long_text_read_a_block_at_a_time_gives_the_defined_snippet(case: str) -> None:
    text, query = _long_texts()[case]
    assert testing.search_snippet(text, query) == defined_snippet(text, query)


def test_a_snippet_after_a_word_of_megabytes_shows_its_first_characters_then_the_match(
) -> None:
    # A hex dump a tool read, in a result that is not ASCII: where the match's context
    # begins is found by a pattern's run over the long word, not a character at a time
    # (benchmarks/bench_snippets.py times it against ordinary text).
    text = "Datei für Müller: " + "9f" * 1_000_000 + " zebra checksum"
    assert testing.search_snippet(text, "zebra") == [
        ("Datei für Müller: " + "9f" * 32 + "… ", False), ("zebra", True),
        (" checksum", False),
    ]


def test_a_snippet_after_a_long_run_of_chinese_characters_shows_the_characters_before_it(
) -> None:
    # Each Chinese character is a word: a block of the text may end between two, so the run
    # before the match is not read a word at a time (timed by benchmarks/bench_snippets.py).
    text = "東" * 1_000_000 + " zebra"
    assert testing.search_snippet(text, "zebra") == [("…" + "東" * 24 + " ", False),
                                                     ("zebra", True)]


@pytest.mark.parametrize("text", [
    "zebra " + "lorem ipsum " * 500_000,
    "zébra " + "lorem ipsüm " * 500_000,
    "zebra" + " ," * 3_000_000,
], ids=["ascii", "not ascii", "punctuation"])
def test_a_snippet_near_the_start_of_a_long_text_takes_no_string_for_each_piece_after_it(
    text: str,
) -> None:
    # What follows a snippet's last word is read only as far as the snippet shows it: a
    # string for each piece of the rest of a message of megabytes took ten times its size.
    tracemalloc.start()
    try:
        shown = testing.search_snippet(text, "zebra")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert shown[0][1] and len("".join(piece for piece, _ in shown)) < 120
    assert peak < 2 * len(text), f"{peak:,} bytes at most for a text of {len(text):,}"


def test_a_snippet_of_a_phrase_whose_first_word_is_everywhere_shows_where_the_phrase_is(
) -> None:
    # "de" stands in every block of this document, "paris" in the last alone: the words of
    # a block are cut to look for the phrase only where all of its words stand (timed by
    # benchmarks/bench_snippets.py).
    text = "Le café de la gare est à côté de la mairie et de la poste. " * 70_000
    text += "Le musée de Paris."
    assert testing.search_snippet(text, '"de paris"') == [
        ("…la mairie et de la poste. Le musée ", False), ("de", True), (" ", False),
        ("Paris", True), (".", False),
    ]


def test_a_snippet_of_stacked_marks_or_joiners_stays_short() -> None:
    for run in ("\u0301" * 5000, "\u200d" * 5000):
        shown = testing.search_snippet(f"porto a{run} hotel", "porto")
        assert sum(len(text) for text, _ in shown) < 200


def test_a_snippet_marks_a_word_written_with_combining_marks_whole() -> None:
    # Decomposed accents (macOS file names, PDFs), Hindi vowel signs, a Thai tone mark.
    assert testing.search_snippet("Zu\u0308rich ist scho\u0308n", "zurich") == [
        ("Zu\u0308rich", True), (" ist scho\u0308n", False),
    ]
    assert testing.search_snippet("हिन्दी भाषा", "हिन्दी") == [("हिन्दी", True), (" भाषा", False)]
    assert testing.search_snippet("ไม่ ใช่", "ไม") == [("ไม่", True), (" ใช่", False)]
    words = " ".join(f"w{i}" for i in range(7))
    assert testing.search_snippet(f"porto {words} Cafe\u0301 more", "porto") == [
        ("porto", True), (f" {words} Cafe\u0301…", False),
    ]


@settings(max_examples=200)
@given(
    st.lists(st.sampled_from(["e", "\u0301", "\u0e17", "\u0e35", "\u0e48", "\u0915", "\u093e",
                              "\u00ad"]), min_size=1, max_size=6)
    .map("".join)
    .filter(lambda unit: any(c.isalpha() for c in unit)),  # marks between letters
    st.integers(1, 120),
)
def test_a_word_written_with_marks_shows_at_most_its_first_64_characters_then_an_ellipsis(
    unit: str, times: int
) -> None:
    # Decomposed accents, or a line of Thai (its words are not separated by spaces): one
    # word as written, cut as an ASCII word is.
    word = "w" + unit * times
    shown = testing.search_snippet(f"porto {word} hotel", "porto")
    assert shown[0] == ("porto", True)
    text = shown[1][0].removeprefix(" ").removesuffix(" hotel")
    if len(word) <= 64:
        assert text == word
    else:
        assert text.endswith("…") and word.startswith(text[:-1])
        assert 64 - 16 <= len(text) - 1 <= 64


def test_a_snippet_cuts_between_whole_characters_as_a_reader_sees_them() -> None:
    flags = "\U0001f1f5\U0001f1f9" * 40  # a flag is two regional indicators
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 20  # five code points each
    for gap, whole in ((flags, "\U0001f1f5\U0001f1f9"), (family, family[:5])):
        shown = "".join(text for text, _ in testing.search_snippet(f"porto {gap} hotel", "porto"))
        head, tail = shown.removeprefix("porto ").removesuffix(" hotel").split("…")
        assert head and tail and head == whole * (len(head) // len(whole))
        assert tail == whole * (len(tail) // len(whole))


def test_a_snippet_of_json_starts_where_a_token_does_not_inside_one() -> None:
    keys = ", ".join(f'"k{i}": "v"' for i in range(12))
    result = f'{{{keys}, "city": "porto", "nights": 2}}'
    shown = "".join(text for text, _ in testing.search_snippet(result, "porto"))
    assert shown == '…"v", "k9": "v", "k10": "v", "k11": "v", "city": "porto", "nights": 2}'
    whole = '{"results": [{"city": "porto"}]}'
    assert testing.search_snippet(whole, "results") == [
        ('{"', False), ("results", True), ('": [{"city": "porto"}]}', False),
    ]
    # Punctuation is left out when a word stands right before it, or when it runs long.
    assert testing.search_snippet("refund_order porto", "order") == [
        ("refund_", False), ("order", True), (" porto", False),
    ]
    assert testing.search_snippet("see " + "=" * 20 + "porto", "porto") == [
        ("see " + "=" * 20, False), ("porto", True),
    ]


def test_a_snippet_marks_what_it_leaves_out_and_squeezes_whitespace() -> None:
    text = "  ".join(f"w{i}" for i in range(30)) + " the Porto\n\nhotel, by the sea. " + "y" * 90
    assert testing.search_snippet(text, "porto") == [
        ("…w23 w24 w25 w26 w27 w28 w29 the ", False), ("Porto", True),
        (" hotel, by the sea. " + "y" * 64 + "…", False),
    ]
    assert testing.search_snippet("(Porto) is  nice.", "porto") == [
        ("(", False), ("Porto", True), (") is nice.", False),
    ]
    assert testing.search_snippet("Nothing here, at all!", "porto") == [
        ("Nothing here, at all!", False),
    ]
    long_words = [f"{i}" + "z" * 199 for i in range(12)]  # 200 characters each
    assert testing.search_snippet(" ".join([*long_words, "porto"]), "porto") == [
        ("…" + " ".join(w[:64] + "…" for w in long_words[4:]) + " ", False), ("porto", True),
    ]
    # A blob found by the start of its words, in a line of punctuation: bounded either way.
    blob, commas = "Porto" + "x" * 200_000, " ," * 30_000 + " "
    assert testing.search_snippet(f"at {blob}{commas}end", "porto*") == [
        ("at ", False), (blob[:64], True), ("…" + commas[:32] + "…" + commas[-31:] + "end", False),
    ]
    many = " ".join(f"w{i}" for i in range(20))
    first_nine = " ".join(f"w{i}" for i in range(9))
    assert testing.search_snippet(many, "porto") == [(first_nine + "…", False)]


def defined_match(words: list[str], query: str) -> bool:
    """Whether text of these words holds every term of ``query`` (words, ``"phrases"``,
    a last word starred as a prefix) and none it excludes, a term at every place."""

    def holds(term: str) -> bool:
        wanted = defined_words(term.strip('"*'))
        prefix = term.endswith("*")
        for at in range(len(words) - len(wanted) + 1):
            here = words[at : at + len(wanted)]
            if here[:-1] == wanted[:-1] and (
                here[-1] == wanted[-1] or (prefix and here[-1].startswith(wanted[-1]))
            ):
                return True
        return False

    terms = re.findall(r'-?"[^"]*"\*?|\S+', query)
    return all(holds(t) for t in terms if not t.startswith("-")) and not any(
        holds(t[1:]) for t in terms if t.startswith("-")
    )


PHRASES = ['"a b"', '"a b a"', '"b a"*', '"a a"', "a -b", '"b c" a', '"c"', 'c -"a b"']


@settings(max_examples=300)  # cheap, and a miss needs a word repeated at the right place
@given(st.lists(st.sampled_from(["a", "b", "c", "ab"]), max_size=10), st.sampled_from(PHRASES))
def test_a_phrase_matches_its_words_one_after_the_other_anywhere_in_the_text(
    words: list[str], query: str
) -> None:
    message = {"id": "m", "role": "user", "content": " ".join(words)}
    assert testing.search_matches(query, message) == defined_match(words, query)


#: Words to write texts of, accented, in capitals, decomposed, unspaced, and past
#: :data:`~agui_store.history.search.MAX_WORD`; and what stands between them.
TOKENS_ASCII = ["a", "b", "ab", "A", "e", "z9", "w" * 64, "W" * 70, "b_a"]
TOKENS = [*TOKENS_ASCII, "É", "é", "e\u0301", "東", "京", "Straße"]
BETWEEN = [" ", "\n", "-", "", ", ", "\u3000"]
TEXT_QUERIES = [
    '"a b"', '"ab a"*', '"e e"', 'e -"a b"', '"東 京"', '"a z9"', '"b a" -ab', 'a* "b e"',
    f'"{"w" * 64} a"', f'"a {"w" * 70}"*', '-"e a" b', '"a-b"', '"京 a"', '"strasse e"',
]


def written(tokens: list[tuple[str, str]]) -> str:
    return "".join(token + between for token, between in tokens)


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.lists(st.tuples(st.sampled_from(TOKENS_ASCII), st.sampled_from(BETWEEN[:-1]))),
        st.lists(st.tuples(st.sampled_from(TOKENS), st.sampled_from(BETWEEN))),
    ).map(written),
    st.sampled_from(TEXT_QUERIES),
    st.integers(1, 12),
    st.integers(0, 200),
)
def test_a_query_matches_a_text_as_it_matches_the_text_s_words(
    monkeypatch: pytest.MonkeyPatch, text: str, query: str, block: int, budget: int
) -> None:
    """A phrase is checked on a message's text without cutting the whole of it into words
    (a message of megabytes would be a string a word); it matches as on the words, folded,
    cut to their length, and within the budget of distinct words (tiny blocks and budgets
    here stand for the megabytes of each)."""
    parsed = search_rules.parse(query)  # a query's words are not cut by the budget
    with monkeypatch.context() as patched:
        patched.setattr(search_rules, "_BLOCK", block)
        patched.setattr(search_rules, "MAX_DISTINCT_BYTES", budget)
        assert parsed.matches_text(text) == parsed.matches(search_rules.words(text))


@pytest.mark.parametrize("text", [
    "lorem ipsum dolor sit amet " * 160_000 + "zebra checksum",
    "zebra checksum " + "lorem ipsum dolor sit amet " * 160_000,
])
def test_a_phrase_is_checked_in_a_message_of_megabytes_without_a_string_per_word(
    text: str,
) -> None:
    """ASCII text (what agents mostly say, and tools read) is searched for a phrase's words
    in place; past the first megabyte its distinct words are counted a small block at a
    time, to know they are all found."""
    parsed = search_rules.parse('"zebra checksum"')
    tracemalloc.start()
    try:
        assert parsed.matches_text(text)
        assert not search_rules.parse('"checksum zebra"').matches_text(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(text), f"{peak:,} bytes at most for a text of {len(text):,}"


def words_as_written(text: str) -> list[tuple[int, str]]:
    """``(where, word)`` of each word of ``text`` as written: a letter or digit, then the
    letters, digits and characters folding deletes (marks, a soft hyphen) after it; a Han,
    Hiragana or Katakana character is a word alone, as no space parts those scripts' words.
    Stated for the characters :data:`FOLDED_ALIKE` draws from."""

    def alone(ch: str) -> bool:
        return unicodedata.name(ch, "").startswith(("CJK UNIFIED", "HIRAGANA", "KATAKANA "))

    def letter(ch: str) -> bool:
        return ch.isalnum() and not alone(ch)

    found: list[tuple[int, str]] = []
    i = 0
    while i < len(text):
        if alone(text[i]):
            found.append((i, text[i]))
            i += 1
        elif letter(text[i]):
            end = i + 1
            while end < len(text) and (letter(text[end]) or search_rules.fold(text[end]) == ""):
                end += 1
            found.append((i, text[i:end]))
            i = end
        else:
            i += 1
    return found


def first_match_word_by_word(text: str, query: str) -> int | None:
    """Where a run page shows a long text from, read as the definition reads it: a word as
    written at a time from the text's start, each folded alone, to the first word that
    completes a term (a phrase: where its first word begins)."""
    parsed = search_rules.parse(query)
    found = [t for t in parsed.terms if not t.exclude]
    read: list[str] = []
    starts: list[int] = []
    for start, written in words_as_written(text):
        for word in search_rules.words(written):
            read.append(word)
            starts.append(start)
            for term in found:
                n = len(term.words)
                if term.stands_at(read, len(read) - n):
                    return starts[-n]
    return None


#: Characters where folding a block at once could part from folding a word alone: marks, a
#: soft hyphen, signs and letters that decompose into several (``㎏``, ``½``, ``ß``, halfwidth
#: kana and their voiced mark), Chinese and Japanese, spaces and ``_``.
FOLDED_ALIKE = "ab é\u0301\u00ad㎏½ßΣｶﾞ東京 _-\n9"
FIRST_MATCH_QUERIES = [
    "b", "ab", "b*", '"a b"', '"b a"*', '"a a b"', "東京", "kg", "ss", "\u03c3", "カ", '"1 2"',
    "a -b",
]


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(alphabet=st.sampled_from(FOLDED_ALIKE), max_size=80),
    st.sampled_from(FIRST_MATCH_QUERIES),
    st.integers(1, 12),
)
def test_where_a_long_text_is_shown_from_is_the_first_match_read_word_by_word(
    monkeypatch: pytest.MonkeyPatch, text: str, query: str, block: int
) -> None:
    """A long text is looked through a block at a time (tiny blocks here stand for the
    thousands of characters of each) and read word by word only where a match ends: the
    place found is the one a word-by-word reading from the start finds."""
    monkeypatch.setattr(search_rules, "_FOLD_BLOCK", block)
    text = "é" + text  # not ASCII, which is read otherwise
    expected = first_match_word_by_word(text, query)
    assert search_rules.first_match(text, search_rules.parse(query)) == expected


def test_where_a_long_text_without_a_match_is_shown_from_is_found_without_reading_its_words(
) -> None:
    """A text of megabytes that does not hold the query (it was found in a tool call's
    arguments, say) is looked through a block at a time, never cut into its words."""
    text = "Zürich grüßt " * 100_000
    tracemalloc.start()
    try:
        assert search_rules.first_match(text, search_rules.parse("zanzibar")) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(text)


@pytest.mark.parametrize(("tail", "query", "written"), [
    ("line\nZürich", "zurich", "Z\\u00fcrich"),
    ('"quoted" 😀 über', "uber", "\\u00fcber"),
    ("tab\tAB", "ab", "AB"),
    ("ŁÓDŹ", "lodz", "\\u0141\\u00d3D\\u0179"),
])
def test_a_match_in_json_is_found_where_its_escape_is_written(
    tail: str, query: str, written: str
) -> None:
    """A tool's JSON is found with its strings' escapes read; where a page shows it from is
    the place in the JSON as written where the word's first character stands."""
    document = json.dumps({"lines": "x\n" * 40 + tail})
    at = search_rules.first_match_as_written(document, search_rules.parse(query))
    assert at == document.index(written)
