"""Names matched as ``git branch --list`` matches them (git's wildmatch, without its path
mode): ``*`` any run of characters, ``/`` included; ``?`` one character; ``[...]`` one of a
set, negated by ``!`` or ``^``, with ranges (``a-c``) and the POSIX classes (``[:upper:]``);
a backslash takes the next character as it is. Case counts.

Python's :mod:`fnmatch` differs where a git user would notice: it reads ``[^a]`` as "``^``
or ``a``" and knows no ``[:class:]``.
"""

from __future__ import annotations

import functools
import re

#: The POSIX classes git's wildmatch knows, as ASCII ranges (branch names are ASCII).
CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


def matches(pattern: str, name: str) -> bool:
    """Whether ``name`` matches ``pattern``. A pattern with an unknown class or an unclosed
    ``[`` matches nothing, as git lists nothing for it."""
    compiled = _compiled(pattern)
    return compiled is not None and compiled.fullmatch(name) is not None


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "\\" and i < n:
            out.append(re.escape(pattern[i]))
            i += 1
        elif c == "[":
            found = _bracket(pattern, i)
            if found is None:
                return None
            text, i = found
            out.append(text)
        else:
            out.append(re.escape(c))
    return re.compile("".join(out), re.DOTALL)


def _bracket(pattern: str, i: int) -> tuple[str, int] | None:
    """The set that starts after the ``[`` at ``i - 1``, as a regular expression, and where
    the pattern goes on (``None``: the set is not closed, or names an unknown class)."""
    n = len(pattern)
    negate = i < n and pattern[i] in "!^"
    i += negate
    items: list[str] = []
    first = True
    while i < n and (pattern[i] != "]" or first):
        first = False
        if pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            if end < 0 or pattern[i + 2 : end] not in CLASSES:
                return None
            items.append(CLASSES[pattern[i + 2 : end]])
            i = end + 2
            continue
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            c = pattern[i + 1]
            i += 1
        if i + 2 < n and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            high = pattern[i + 2]
            if high == "\\" and i + 3 < n:
                high = pattern[i + 3]
                i += 1
            # git reads a range's first character before it knows it starts one: a
            # reversed range holds that character alone.
            items.append(f"{re.escape(c)}-{re.escape(high)}" if c <= high else re.escape(c))
            i += 3
            continue
        items.append(re.escape(c))
        i += 1
    if i >= n:
        return None
    return "[" + ("^" if negate else "") + "".join(items) + "]", i + 1
