"""A search hit's snippet in a long message: does it cost what it shows, whatever stands
beside the match?

A snippet shows a few words around the match. Where its context begins, and what follows
its last word, are found in the message's text; a text whose words are megabytes long (a hex
dump a tool read, in a result that is not ASCII), or a run of Chinese characters with no
punctuation (each a word of its own), or megabytes after a match near the start, must not be
read a character or a word at a time; nor a text in every block of which a phrase's first
word stands. Each case is timed (median of ``--repeat``) next to
its baseline, measured in the same run: the snippet of the same match in a text of the same
length made of ordinary words. A ratio near 1 at every size means the long word costs no
more than ordinary text; one that grows with the size means a scan that goes back over
what it read.

Then whole searches of a store holding one message of each size (ordinary words, a
phrase at its end): ``Store.search`` of the phrase, whose order is checked on the message's
text, against ``Store.search`` of its first word alone on the same store, in the same run.

    python -m benchmarks.bench_snippets [--sizes 250000,1000000,4000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os

import agui_store
from agui_store import testing
from benchmarks._common import header, median_time, scratch_dir


def cases(size: int) -> dict[str, tuple[str, str]]:
    """Each case's text of about ``size`` characters and the query its snippet is for."""
    hexdump = "9f" * (size // 2)
    return {
        "after a hex dump (not ASCII)": (f"Datei für Müller: {hexdump} zebra checksum", "zebra"),
        "after Chinese characters": ("東" * size + " zebra", "zebra"),
        "before megabytes of words": ("zébra " + "lorem ipsüm " * (size // 12), "zébra"),
        # "de" stands in every block, "paris" in the last alone.
        "a phrase, its first word common": (
            "Le café de la gare est à côté de la poste. " * (size // 43) + "Le musée de Paris.",
            '"de paris"',
        ),
    }


def ordinary(size: int) -> str:
    """The baseline's text: words of ordinary length, the match at the end."""
    return "lorem ipsüm dolor " * (size // 18) + " zebra checksum"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250000,1000000,4000000",
                        help="characters of each text, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    header("search snippets in long messages, against the same match in ordinary text")
    print(f"{'case':<32}{'characters':>12}{'seconds':>10}{'baseline':>10}{'ratio':>8}")
    for size in sizes:
        baseline = median_time(
            functools.partial(testing.search_snippet, ordinary(size), "zebra"),
            repeat=args.repeat,
        )
        for name, (text, query) in cases(size).items():
            took = median_time(
                functools.partial(testing.search_snippet, text, query), repeat=args.repeat
            )
            print(f"{name:<32}{len(text):>12,}{took:>10.4f}{baseline:>10.4f}"
                  f"{took / baseline:>8.2f}")
    print()
    print(f"{'search of a phrase at the end':<32}{'characters':>12}{'seconds':>10}"
          f"{'one word':>10}{'ratio':>8}")
    for size, (name, text) in itertools.product(sizes, texts_with_a_phrase(sizes[-1]).items()):
        text = text[-size:]
        location = os.path.join(scratch_dir("agui-bench-phrase-"), "store.db")
        with agui_store.open(location) as store:
            store.append(one_message("long", text), thread_id="long")
            assert len(store.search('"zebra checksum"')) == 1
            word = median_time(functools.partial(store.search, "zebra"), repeat=args.repeat)
            phrase = median_time(
                functools.partial(store.search, '"zebra checksum"'), repeat=args.repeat
            )
        print(f"{name:<32}{len(text):>12,}{phrase:>10.4f}{word:>10.4f}"
              f"{phrase / word:>8.2f}")


def texts_with_a_phrase(size: int) -> dict[str, str]:
    """Texts of at least ``size`` characters ending in the phrase searched for: ASCII words
    (checked in place), and words with accents (checked a block of words at a time)."""
    return {
        "ASCII words": "lorem ipsum dolor " * (size // 18) + " zebra checksum",
        "words with accents": ordinary(size),
    }


def one_message(thread: str, text: str) -> list[dict[str, str]]:
    """A run whose one message is ``text``."""
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": "r1"},
    ]


if __name__ == "__main__":
    main()
