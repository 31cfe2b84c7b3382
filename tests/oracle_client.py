"""A Python handle on the official client, run by ``tests/oracle/harness.mjs`` under node.

One node process serves a whole test session (one JSON line in, one out), so that thousands
of hypothesis examples cost milliseconds each instead of a node start-up each.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

HARNESS_DIR = Path(__file__).resolve().parent / "oracle"

#: "No start value given" (``None`` is a real start state: JSON null).
UNSET: Any = object()


def unavailable_reason() -> str | None:
    """Why the oracle cannot run here, or ``None`` when it can."""
    if shutil.which("node") is None:
        return "node is not installed (the differential tests need the official @ag-ui/client)"
    if not (HARNESS_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        return "the oracle harness is not installed: run `npm ci --prefix tests/oracle`"
    return None


class Oracle:
    """The official ``@ag-ui/client`` 1.0.0: replay, compact and verify."""

    def __init__(self) -> None:
        self._proc = self._spawn()
        self._lock = threading.Lock()

    @staticmethod
    def _spawn() -> subprocess.Popen[str]:
        env = {**os.environ, "SUPPRESS_TRANSFORMATION_WARNINGS": "1"}
        return subprocess.Popen(
            ["node", str(HARNESS_DIR / "harness.mjs")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=HARNESS_DIR,
            env=env,
            text=True,
            encoding="utf-8",
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        line = json.dumps(request, ensure_ascii=False, allow_nan=False) + "\n"
        with self._lock:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            try:
                self._proc.stdin.write(line)
                self._proc.stdin.flush()
                answer = self._proc.stdout.readline()
            except BrokenPipeError:
                answer = ""
            if not answer:
                # One request that kills node (out of memory, say) fails its own test only:
                # the next request gets a new process instead of a broken pipe.
                self._restart()
                raise RuntimeError(
                    f"the oracle process died on a {request.get('op')} request of "
                    f"{len(line)} characters"
                )
        result: dict[str, Any] = json.loads(answer)
        return result

    def _restart(self) -> None:
        with contextlib.suppress(OSError):
            self._proc.kill()
        self._proc.wait(timeout=10)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._proc = self._spawn()

    def replay(
        self,
        events: list[dict[str, Any]],
        *,
        messages: list[dict[str, Any]] | None = None,
        state: Any = UNSET,
        mode: str = "reducer",
    ) -> dict[str, Any]:
        """``{"ok", "messages", "state", "pendingInterrupts"}`` as the client holds them."""
        req: dict[str, Any] = {"op": "replay", "events": events, "mode": mode}
        if messages is not None:
            req["messages"] = messages
        if state is not UNSET:
            req["state"] = state
        return self.ask(req)

    def compact(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        answer = self.ask({"op": "compact", "events": events})
        if not answer["ok"]:
            raise RuntimeError(answer["error"])
        result: list[dict[str, Any]] = answer["events"]
        return result

    def verify(
        self, events: list[dict[str, Any]], *, schema: bool = False, chunks: bool = False
    ) -> dict[str, Any]:
        """``{"ok": True, "count": n}`` or ``{"ok": False, "index": i, "error": text}``."""
        return self.ask({"op": "verify", "events": events, "schema": schema, "chunks": chunks})

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=10)
        if self._proc.stdout:
            self._proc.stdout.close()


_SAFE = 2**53


def as_js(value: Any) -> Any:
    """``value`` as JavaScript reads it back: every number is a double.

    JSON.stringify prints a large double like 4.2e16 as the integer 42000000000000000, which
    Python parses as an int that no longer equals the float it came from. Comparing through
    this keeps such numbers equal when they are the same double.
    """
    if isinstance(value, dict):
        return {k: as_js(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_js(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _SAFE:
        return float(value)
    return value
