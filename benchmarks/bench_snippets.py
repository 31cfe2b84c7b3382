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

    python -m benchmarks.bench_snippets [--sizes 250000,1000000,4000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import functools

from agui_store import testing
from benchmarks._common import header, median_time


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


if __name__ == "__main__":
    main()
