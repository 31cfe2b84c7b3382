"""``Store.check()``: the file's integrity, SQLite's and the store's own invariants.

Read-only: it reports, it never repairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import apsw


@dataclass(frozen=True)
class Problem:
    """One broken invariant: which check, and what exactly is wrong where."""

    check: str
    detail: str

    def __str__(self) -> str:
        return f"{self.check}: {self.detail}"


@dataclass(frozen=True)
class CheckReport:
    """What ``Store.check()`` found. Truthy when the file is sound."""

    problems: list[Problem] = field(default_factory=list)
    checked: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok


def check_database(conn: apsw.Connection) -> CheckReport:
    """Run every check on an open store connection (inside one read transaction)."""
    problems: list[Problem] = []
    for (line,) in conn.execute("PRAGMA integrity_check"):
        if line != "ok":
            problems.append(Problem("sqlite", str(line)))
    return CheckReport(problems, ("sqlite",))
