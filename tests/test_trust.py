"""A connection keeps the decoded messages of a blob only when each is a flat dict
(:mod:`agui_store.engine.trust`), told from the blob's text by counting its brackets."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from agui_store.codec import ingest
from agui_store.engine.checkpoints import chunk_text
from agui_store.engine.trust import TrustedBlobs
from agui_store.history import blobs
from tests.strategies import json_keys, json_objects, json_scalars, json_values

flat_objects = st.dictionaries(json_keys, json_scalars, max_size=4)


def flat(message: Any) -> bool:
    return type(message) is dict and all(
        not isinstance(v, (dict, list)) for v in message.values()
    )


def bracketed(message: dict[str, Any]) -> bool:
    """Whether a key or a string value holds a ``[`` or a ``{`` (its blob is then not kept:
    the count cannot tell it from a nested value)."""
    strings = [*message, *(v for v in message.values() if isinstance(v, str))]
    return any("[" in s or "{" in s for s in strings)


@given(st.lists(flat_objects | json_objects | json_values, max_size=6))
@example([{"a": {"b": 1}}, {"c": "d"}])
@example([{"a": [1]}, {"b": None}])
@example([{"a": "{"}, {"b": 1}])
@example([{"a": 1}, {"b": "{"}, 2])
def test_a_blob_s_messages_are_kept_only_when_each_is_a_flat_dict(messages: list[Any]) -> None:
    text = chunk_text([ingest.canonical_bytes(m) for m in messages])
    address = blobs.digest(text)
    trusted = TrustedBlobs()
    assert not trusted.keep_messages(address, text, ingest.decode(text))  # read once
    decoded = ingest.decode(text)
    kept = trusted.keep_messages(address, text, decoded)
    every_flat = all(flat(m) for m in decoded)
    assert kept == (every_flat and not any(bracketed(m) for m in decoded))
    assert trusted.kept_messages(address) == (decoded if kept else None)
