"""The words a message is found by, against the definition written out here on its own:
case folded, NFKD without combining marks, runs of Unicode letters and digits (``_`` and
everything else between words), each cut to 64 characters."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from agui_store import testing

WORD = re.compile(r"[^\W_]+")


def defined_words(text: str) -> list[str]:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    kept = "".join(c for c in decomposed if not unicodedata.category(c).startswith("M"))
    return [w[:64] for w in WORD.findall(kept)]


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


def test_case_accents_and_underscores_fold_as_a_reader_expects() -> None:
    assert found_by("Café CAFÉ naïve Straße ﬁle refund_order e-mail 東京タワー") == [
        "cafe", "cafe", "naive", "strasse", "file", "refund", "order", "e", "mail", "東京タワー",
    ]
    assert found_by("x" * 70) == ["x" * 64]
    assert given_to_the_index("Word " + "x" * 70 + " y" * 64) == ["word", "x" * 64, *"y" * 64]
