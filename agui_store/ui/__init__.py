"""A local web viewer of a store: threads, run trees, runs, diffs and forks.

Needs the ``ui`` extra (``pip install 'agui-store[ui]'``: Starlette, Jinja2, uvicorn). Three
ways in:

- ``agui-store ui [DB]`` serves it on 127.0.0.1 and opens the browser (:func:`serve`);
- :func:`app` is the same viewer as an ASGI app, to mount in a FastAPI or Starlette app
  behind its own authentication, with ``scope=`` as the ``Recorder`` takes it (it answers
  whatever ``Host`` that app answers: the app's own host checks apply);
- :func:`show` displays one thread inline in a Jupyter notebook.

Served by :func:`serve` or :func:`show`, it answers only requests whose ``Host`` names the
address it listens on or the loopback interface (``127.0.0.1``, ``localhost``, ``::1``),
unless it listens on every interface: a page of another site that renames its host to
127.0.0.1 (DNS rebinding) gets a 421, not the store.

The viewer is read-only unless ``allow_writes=True``, and then it only creates or moves
branches, from its own pages (a JSON ``POST`` whose ``Origin`` is the viewer's: a form on
another site cannot). It renders what the API returns (``checkout``, ``diff``, ``fork``,
``runs``...) and computes nothing of its own. Every asset ships in the package: it works
offline.

What it is built with, and why:

- **Starlette** for routing: the ASGI toolkit FastAPI is built on, so the viewer mounts in a
  FastAPI or Starlette app as it is, and its links follow the mount (``root_path``).
- **Jinja2** for pages, with autoescape on: every stored string (message text, ids, state
  keys) is escaped; nothing recorded is ever marked safe. JSON for the page's scripts is
  embedded with ``<`` escaped. The run tree's rows, the message blocks of the run, diff
  and changes pages and the run page's event rows are the parts formatted in Python
  (``pages.tree_rows_html``, ``pages.message_html``, ``pages.event_rows_html``: every stored
  value escaped), for the speed of the first screen of a long thread, a run and a diff.
- **uvicorn** to serve, as the ASGI recorder's own tests do.
- **No JavaScript framework and no build step**: one small script (``static/viewer.js``:
  JSON trees opened on demand, two runs ticked for a diff, older runs loaded below, the
  live poll, copy buttons) and one stylesheet. Live updates poll a cheap token every 1.5 s
  rather than hold an SSE stream: nothing stays open when the page is closed, and a viewer
  mounted behind a proxy needs no streaming support.
"""

from __future__ import annotations

import threading
import webbrowser
from typing import Any
from urllib.parse import urlencode

from agui_store import Store
from agui_store.engine.arguments import a_kind, check_scope, flag
from agui_store.errors import ArgumentTypeError
from agui_store.store import check_store

try:
    from agui_store.ui.web import build, served_on
except ImportError as e:  # the ui extra is missing: say how to install it
    raise ImportError(
        f"agui_store.ui needs the ui extra: pip install 'agui-store[ui]' ({e})"
    ) from e

__all__ = ["Inline", "app", "serve", "show"]

#: The port ``agui-store ui`` listens on unless told otherwise.
DEFAULT_PORT = 8642


def app(
    store: Store,
    *,
    scope: str | None = None,
    allow_writes: bool = False,
    title: str | None = None,
) -> Any:
    """The viewer of ``store`` as an ASGI app (a Starlette application).

    Mount it under any path of your own app; its links follow the mount::

        from fastapi import FastAPI
        import agui_store, agui_store.ui

        api = FastAPI()
        store = agui_store.open("chat.db")
        api.mount("/history", agui_store.ui.app(store, scope="alice"))

    Args:
        store: the store to show (a ``Store``; it is shared, not closed by the viewer).
        scope: show only this owner's threads; another owner's thread is a 404, as a
            missing one (``None``: the operator, who sees every thread).
        allow_writes: let the pages create and move branches (nothing else is ever
            written). Off by default.
        title: the pages' title (default: the store's path).

    Raises:
        ArgumentTypeError: ``store`` is not a ``Store``, or ``scope``, ``title`` or
            ``allow_writes`` is of a type it does not take.
        InvalidArgumentError: ``scope`` is an empty name, or one no owner can have.
    """
    _check_viewer_arguments(store, scope, allow_writes, title)
    return build(store, scope=scope, allow_writes=allow_writes, title=title)


def _check_viewer_arguments(store: Any, scope: Any, allow_writes: Any, title: Any) -> None:
    """Refuse, at the call, what the viewer's pages would fail on (or misread) later."""
    check_store("the viewer's store=", store)
    check_scope(scope)
    flag("allow_writes", allow_writes)
    if title is not None and not isinstance(title, str):
        raise ArgumentTypeError(f"title= must be None or text, not {a_kind(title)}")


def page_url(base: str, thread_id: str | None = None) -> str:
    """The viewer's URL at ``base``, on a thread's run tree when one is named."""
    if thread_id is None:
        return f"{base}/"
    return f"{base}/thread?{urlencode({'thread': thread_id})}"


def serve(
    store: Store,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    allow_writes: bool = False,
    open_browser: bool = True,
    thread_id: str | None = None,
    ready: Any = None,
) -> None:
    """Serve the viewer with uvicorn until interrupted (what ``agui-store ui`` runs).

    Args:
        port: the port; 0 picks a free one.
        open_browser: open the default browser on the viewer once it listens.
        thread_id: open the browser on this thread's run tree.
        ready: called with the viewer's URL once it listens.
    """
    import uvicorn

    config = uvicorn.Config(
        served_on(app(store, allow_writes=allow_writes), host),
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)

    def announce() -> None:
        # uvicorn has no "listening" callback: wait for its flag, then say where it is.
        while not server.started:
            if server.should_exit:
                return
            threading.Event().wait(0.05)
        sockets = [s for srv in server.servers for s in srv.sockets]
        bound = sockets[0].getsockname()[1] if sockets else port
        shown_host = f"[{host}]" if ":" in host else host
        url = page_url(f"http://{shown_host}:{bound}", thread_id)
        if ready is not None:
            ready(url)
        if open_browser:
            webbrowser.open(url)

    threading.Thread(target=announce, name="agui-store-ui-announce", daemon=True).start()
    server.run()


class Inline:
    """A viewer page shown in a notebook cell (an iframe on a local server)."""

    def __init__(self, url: str, height: int) -> None:
        self.url = url
        self.height = height

    def _repr_html_(self) -> str:
        from html import escape

        return (
            f'<iframe src="{escape(self.url)}" width="100%" height="{self.height}" '
            'style="border:1px solid #ddd;border-radius:6px"></iframe>'
            f'<div><a href="{escape(self.url)}" target="_blank">open in a new tab</a></div>'
        )

    def __repr__(self) -> str:
        return f"<agui-store viewer at {self.url}>"


_SERVERS: dict[tuple[int, str | None], str] = {}
_SERVERS_LOCK = threading.Lock()


def show(store: Store, thread_id: str, *, height: int = 640, scope: str | None = None) -> Inline:
    """Show a thread's run tree inline in a Jupyter notebook::

        agui_store.ui.show(store, "t1")

    Starts the viewer of ``store`` once per store on a free port of 127.0.0.1, in a
    background thread of the kernel, read-only; later calls reuse it.
    """
    import uvicorn

    with _SERVERS_LOCK:
        base = _SERVERS.get((id(store), scope))
        if base is None:
            config = uvicorn.Config(
                served_on(app(store, scope=scope), "127.0.0.1"),
                host="127.0.0.1",
                port=0,
                log_level="warning",
                lifespan="off",
            )
            server = uvicorn.Server(config)
            threading.Thread(target=server.run, name="agui-store-ui", daemon=True).start()
            while not server.started:
                threading.Event().wait(0.02)
            bound = server.servers[0].sockets[0].getsockname()[1]
            base = f"http://127.0.0.1:{bound}"
            _SERVERS[(id(store), scope)] = base
    return Inline(page_url(base, thread_id), height)
