"""State patches: what ``diff`` pays to compare two states, next to serializing them.

``diff.make_patch`` walks two JSON documents in step. Each case is timed next to
``json.dumps`` of both documents in the same run, the cost of reading every value of them
once. Goals:
- a long list that only grew (a state's history) costs what it grew by: well under one
  serialization of the two states (ratio < 0.1);
- an object of 2,000 keys with a tenth of them changed costs about one serialization or
  less (ratio <= 1.5).
A list whose tail is reordered is shown without a goal: each removal paired with an equal
addition becomes a move and shifts the indices of the operations recorded after it, so its
cost grows with the moves times the operations, not with the size of the states.

    python -m benchmarks.bench_state_patch [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import random
import timeit
from collections.abc import Callable
from typing import Any

from agui_store.diff import make_patch
from benchmarks._common import header

GROWN_GOAL = 0.1
KEYS_GOAL = 1.5


def best(fn: Callable[[], Any], repeat: int, number: int = 5) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def cases() -> list[tuple[str, Any, Any, float | None]]:
    rng = random.Random(7)
    history = [{"turn": i, "text": f"message {i} " * 4} for i in range(20_000)]
    grown = ({"history": history, "n": 1}, {"history": [*history, {"turn": -1}], "n": 2})
    keys = {f"k{i}": [rng.random() for _ in range(5)] for i in range(2_000)}
    changed = {k: (v if rng.random() < 0.9 else v[::-1]) for k, v in keys.items()}
    moved = list(range(3_000))
    shuffled = moved[:2_900] + list(reversed(moved[2_900:]))
    return [
        ("a 20,000-entry list grown by one", *grown, GROWN_GOAL),
        ("2,000 keys, a tenth changed", keys, changed, KEYS_GOAL),
        ("3,000 numbers, the last 100 reversed", moved, shuffled, None),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    header("state patches vs json.dumps of both states")
    print("| case | make_patch ms | baseline: json.dumps of both, ms | ratio | goal |")
    print("|---|---|---|---|---|")
    for name, old, new, goal in cases():
        took = best(lambda old=old, new=new: make_patch(old, new), args.repeat)
        baseline = best(lambda old=old, new=new: (json.dumps(old), json.dumps(new)), args.repeat)
        ratio = took / baseline
        if goal is None:
            verdict = "none (moves)"
        else:
            verdict = f"<= {goal}x: " + ("met" if ratio <= goal else "NOT met")
        print(f"| {name} | {took * 1e3:.2f} | {baseline * 1e3:.2f} | {ratio:.2f}x | {verdict} |")


if __name__ == "__main__":
    main()
