"""A writer process: ``Store`` writes run in a child interpreter, so they never hold this one's GIL.

Parsing, validating and replaying a batch is Python and msgspec work that holds the GIL: on a
worker *thread*, one 4 MB ``STATE_SNAPSHOT`` kept the event loop from running for tens of
milliseconds at a time (``benchmarks/bench_async.py``). In a child process the loop's
interpreter only pickles the call (event bytes: a copy) and waits on a pipe with the GIL
released.

The child is a fresh ``python -m agui_store._writer`` (not ``multiprocessing``, whose spawn
re-imports the parent's ``__main__``), talking over two pipes with
``multiprocessing.connection.Connection`` framing. It opens its own ``Store`` on the same file
(SQLite serializes the two connections' writes) and serves one call at a time, at a lower
CPU priority (:data:`NICE`). It exits when told to or when the parent's end of the pipe
closes, so it never outlives its parent.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from agui_store.errors import AguiStoreError

__all__ = ["Unsendable", "WriterProcess"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])

#: The writer's niceness: recording is background work, so on a busy machine the scheduler
#: gives the CPU to the server first. With 20 streams recorded on 2 loaded cores, the loop's
#: p99 lag is about 1.9x the unrecorded app's at normal priority and 1.1x at nice 10
#: (``benchmarks/bench_async.py`` measures both); a starved writer only appends bigger
#: batches later.
NICE = 10


class Unsendable(Exception):
    """A call's arguments hold a value pickle cannot send (a lock, a function) or the child
    cannot load (a class only the parent has): nothing was done, and the child goes on
    serving."""


class WriterProcess:
    """A child process that owns a ``Store`` on ``path`` and runs the calls it is sent.

    Not thread-safe: one thread (the AsyncStore's worker) makes every call.
    """

    def __init__(self, path: str, options: dict[str, Any], *, nice: int = NICE) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ)
        # The child imports this very package, wherever it was imported from.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "agui_store._writer",
                    str(to_child_r),
                    str(from_child_w),
                    str(nice),
                ],
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                # A session of its own: a terminal's Ctrl+C signals its whole foreground
                # process group, and would end the writer mid-append while the server it
                # serves shuts down and appends what its recorders still hold. It ends
                # with its parent all the same: its pipe closes.
                start_new_session=True,
                env=env,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(from_child_r, writable=False)
        self._closed = False
        # Never closed (its AsyncStore dropped without close()): closing our ends of the
        # pipes ends the child, and a thread reaps it, so nothing is left running.
        self._abandoned = weakref.finalize(self, _abandon, self._proc, self._send, self._recv)
        self.call("__open__", (path,), options)

    @property
    def alive(self) -> bool:
        """False once closed or once the child was found gone."""
        return not self._closed

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``store.<name>(*args, **kwargs)`` in the child; its exception is raised here."""
        if self._closed:
            raise AguiStoreError("the writer process is closed")
        try:
            # Pickled before anything is written, as Connection.send does: a value pickle
            # refuses leaves the pipe as it was.
            message = ForkingPickler.dumps((name, args, kwargs))
        except Exception as exc:
            raise Unsendable(str(exc)) from exc
        try:
            self._send.send_bytes(message)
            ok, value = self._recv.recv()
        except (EOFError, OSError) as exc:
            self._closed = True
            self._abandoned.detach()
            self._send.close()
            self._recv.close()
            self._proc.kill()  # gone already, or going: its pipe is
            self._proc.wait()
            raise AguiStoreError(
                f"the writer process ended unexpectedly (exit code {self._proc.poll()})"
            ) from exc
        if ok:
            return value
        raise _rebuilt(value)

    def leave(self) -> None:
        """In a process forked from the one that started the child: close this process's
        copies of the pipes, without a word to the child, which goes on serving its
        parent."""
        self._closed = True
        self._abandoned.detach()
        self._send.close()
        self._recv.close()

    def close(self) -> None:
        """Close the child's store and wait for it to exit."""
        if self._closed:
            return
        self._closed = True
        try:
            self._send.send(None)
            self._recv.recv()
        except (EOFError, OSError):
            pass
        finally:
            self._abandoned.detach()
            self._send.close()
            self._recv.close()
            _reap(self._proc)


def _abandon(proc: subprocess.Popen[bytes], send: Connection, recv: Connection) -> None:
    for end in (send, recv):
        with contextlib.suppress(OSError):
            end.close()
    reaper = threading.Thread(target=_reap, args=(proc,), name="agui-store-reaper", daemon=True)
    reaper.start()


def _reap(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _portable(exc: BaseException) -> tuple[Any, ...]:
    """An exception as data that pickles: its class, args and attributes."""
    return (type(exc), exc.args, dict(getattr(exc, "__dict__", {})), str(exc))


def _rebuilt(value: tuple[Any, ...]) -> BaseException:
    cls, args, attributes, text = value
    try:
        exc: BaseException = cls.__new__(cls)
        BaseException.__init__(exc, *args)
        exc.__dict__.update(attributes)
        return exc
    except Exception:  # a class that cannot be rebuilt this way: keep its message
        return AguiStoreError(f"{getattr(cls, '__name__', cls)}: {text}")


def _serve(receive: Connection, send: Connection, nice: int = 0) -> None:
    from agui_store.store import Store

    if nice:
        with contextlib.suppress(OSError):  # a platform without nice: normal priority
            os.nice(nice)

    store: Store | None = None
    try:
        while True:
            try:
                message = receive.recv()
            except EOFError:
                return  # the parent is gone
            except Exception as exc:  # pickled there, not loadable here (a class of its own)
                # The class by its module's name: here this module runs as __main__, and the
                # parent could not find it there.
                from agui_store import _writer

                send.send((False, _portable(_writer.Unsendable(str(exc)))))
                continue
            if message is None:
                send.send((True, None))
                return
            name, args, kwargs = message
            try:
                if name == "__open__":
                    store = Store(*args, **kwargs)
                    result = None
                elif name == "append_batch":  # a recorder's batch
                    from agui_store.recording import append_batch

                    assert store is not None
                    result = append_batch(store, *args, **kwargs)
                else:
                    assert store is not None
                    result = getattr(store, name)(*args, **kwargs)
            except BaseException as exc:  # sent back to be raised there
                reply: tuple[bool, Any] = (False, _portable(exc))
            else:
                reply = (True, result)
            try:
                send.send(reply)
            except Exception as exc:  # a result or error that does not pickle
                send.send((False, _portable(AguiStoreError(f"cannot send the result: {exc}"))))
    finally:
        if store is not None:
            store.close()


if __name__ == "__main__":
    _serve(
        Connection(int(sys.argv[1]), writable=False),
        Connection(int(sys.argv[2]), readable=False),
        int(sys.argv[3]),
    )
