"""Only the product speaks: the repository's text describes agui-store, not how its
development was organised (counted work sessions, tracker issue numbers, a private
behaviour document, benchmark cells that narrate earlier versions).

The product's own vocabulary stays allowed: a PostgreSQL session, pytest's session scope, an
upstream issue such as ``@ag-ui/client``'s #2813, the behaviour page's sections.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What is scanned: the README, the docs, the benchmarks, the tests and the package.
SCANNED = ("README.md", "docs", "benchmarks", "tests", "agui_store")
TEXT_SUFFIXES = {".py", ".md", ".mjs", ".js", ".ts", ".toml", ".yml", ".yaml", ".txt", ".sql"}

#: (what it catches, pattern). Case-insensitive.
PATTERNS = [
    ("a counted or dated work session",
     r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
     r"|thirteenth|fourteenth|fifteenth|this|last|previous|next|earlier|later) sessions?\b"),
    ("a tracker issue number", r"(?<!upstream )\bissues? #?\d+(?!\d)(?<!#2813)"),
    ("the private behaviour document", r"\bSPEC ?§|\bSPEC\.md\b"),
    ("a figure narrating an earlier version", r"\(v\d+: [\d.]+x"),
    ("a stretch of work", r"\bstretch(es)? of work\b"),
    ("the people who built it", r"\bbuilders\b|\bplanners?'s? (notes?|asked|said)\b"),
]
COMPILED = [(why, re.compile(p, re.IGNORECASE)) for why, p in PATTERNS]


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", *SCANNED], cwd=ROOT, capture_output=True, text=True,
            check=True,
        ).stdout.split()
        paths = [ROOT / p for p in listed]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        paths = [p for s in SCANNED for p in ([ROOT / s] if (ROOT / s).is_file()
                                              else (ROOT / s).rglob("*"))]
    return sorted(p for p in paths if p.is_file() and p.suffix in TEXT_SUFFIXES
                  and p.name != "package-lock.json" and p != Path(__file__).resolve())


def findings(text: str) -> list[tuple[int, str, str]]:
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for why, pattern in COMPILED:
            if pattern.search(line):
                found.append((n, why, line.strip()))
    return found


def test_the_patterns_catch_what_they_are_for_and_allow_the_products_words() -> None:
    caught = [
        "Measured in the twelfth session", "the goal of issue 10", "see SPEC §3",
        "0.48x (v9: 1.97x)", "one stretch of work", "2 cores shared by seven builders",
        "as this session showed", "Issue 11 asks",
    ]
    allowed = [
        "a PostgreSQL session", "never ends the parent's session", "upstream issue #2813",
        "(upstream 1.0.0, issue #2813)", 'scope="session"', "behaviour.md#lineage",
        "the planner's choices", "jsonpatch's own builder", "issue tracker",
    ]
    assert all(findings(text) for text in caught), [t for t in caught if not findings(t)]
    assert not any(findings(text) for text in allowed), [t for t in allowed if findings(t)]


def test_the_repository_describes_the_product_not_how_it_was_built() -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{n}: {why}: {line[:120]}"
        for path in tracked_files()
        for n, why, line in findings(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not problems, "\n".join(problems)
