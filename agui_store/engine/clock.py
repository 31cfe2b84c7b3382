"""The clock the engine stamps rows with: milliseconds since the epoch.

One function, read at each call, so that every timestamp a store writes comes from one place
(and a test that needs two stores to agree can fix it there).
"""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the epoch, as every ``created_at`` and ``appended_at`` column holds."""
    return time.time_ns() // 1_000_000
