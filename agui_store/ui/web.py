"""The viewer's routes: Starlette endpoints that render Jinja2 templates.

Every id travels as a query parameter (``/run?thread=t&run=r``), never as a path segment:
thread and run ids may hold ``/``, ``%`` or anything else a producer sent. Endpoints whose
reads grow with what they show (a run, a diff, a fork) are plain functions, run in
Starlette's thread pool (a ``Store`` serializes its calls), so a long read never blocks the
event loop of an app the viewer is mounted in. The tree's pages and the live polls read a
bounded page of runs (about a millisecond): they run on the loop, since handing them to a
worker thread cost more than the reads on a loaded machine.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agui_store import (
    AguiStoreError,
    AmbiguousRunError,
    BranchError,
    InvalidArgumentError,
    RunNotFoundError,
    Store,
)
from agui_store.backends import is_url
from agui_store.records import pasted_option, shell_command, when, with_positional
from agui_store.ui import pages, text

HERE = Path(__file__).resolve().parent

#: The agent URL the fork page's snippets start with (the user types theirs).
DEFAULT_AGENT_URL = "http://127.0.0.1:8000/agent"


class Viewer:
    """The viewer of one store: its settings and its endpoints."""

    def __init__(self, store: Store, *, scope: str | None, allow_writes: bool, title: str) -> None:
        self.store = store
        self.scope = scope
        self.allow_writes = allow_writes
        self.title = title
        #: The store as the fork page's snippets open it: a scoped viewer's owner is shown
        #: the file name the command line opens by default, not where the app keeps its store.
        self.pasted_store = _pasted(store.path) if scope is None else "agui-store.db"
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every stored string is escaped; nothing is marked safe
            undefined=jinja2.StrictUndefined,
            auto_reload=False,  # the templates ship with the package: no stat per page
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.globals.update(
            lineage_kind=pages.lineage_kind,
            when=_when,
            short=_short,
            py=lambda value: text.printable(repr(value)),
        )

    # --- helpers ------------------------------------------------------------------------

    def render(
        self,
        request: Request,
        name: str,
        status: int = 200,
        *,
        rows: Markup | None = None,
        **context: Any,
    ) -> Response:
        """The page of template ``name`` with ``context``, its links made under the app's root
        path (the viewer may be mounted inside another app). ``rows``: the run tree's rows,
        their text already as the page shows it (``pages.tree_rows_html``). Templates draw a
        message with ``message_html``, a run's messages with ``conversation_html``, its
        event rows with ``event_rows_html`` and a diff side's changes with ``changes_html``
        (``pages.message_html``), their links made as the template's."""
        root = request.scope.get("root_path", "")

        def link(path: str, **params: Any) -> str:
            query = {k: v for k, v in params.items() if v is not None}
            return f"{root}{path}" + (f"?{urlencode(query)}" if query else "")

        if rows is not None:  # placed after the page's check for hidden characters
            context["rows"] = Markup(text.SHOWN_HERE)
        page = self.templates.get_template(name).render(
            link=link,
            message_html=functools.partial(pages.message_html, link),
            conversation_html=functools.partial(pages.conversation_html, link),
            event_rows_html=functools.partial(pages.event_rows_html, link),
            changes_html=functools.partial(pages.changes_html, link),
            static=f"{root}/static",
            title=self.title,
            allow_writes=self.allow_writes,
            scope=self.scope,
            **context,
        )
        page = text.printable(page)
        shown = text.on_page(page) if rows is None else text.on_page_around(page, rows)
        return HTMLResponse(shown, status_code=status)

    @staticmethod
    def param(request: Request, name: str, default: str | None = None) -> str:
        """The query parameter ``name`` (or ``default``); a 400 when it is absent or empty."""
        value = request.query_params.get(name, default)
        if value is None or value == "":
            raise HTTPException(400, f"the page needs ?{name}=")
        return value

    def existing_thread(self, request: Request) -> str | None:
        """The thread ``?thread=`` names, when the store holds it for this viewer's scope:
        an error page about one of its runs links back to it (``None``: no such thread)."""
        thread_id = request.query_params.get("thread")
        if not thread_id:
            return None
        try:
            found = self.store.thread(thread_id, scope=self.scope)
        except Exception:  # an error page renders whatever else failed, its own reads too
            return None
        return None if found is None else thread_id

    def comparison(self, request: Request, thread_id: str | None) -> dict[str, Any] | None:
        """What a diff's error page puts back in its compare form (a revision mistyped is
        mended there): the two sides and the mode as given, and the thread's branches."""
        if thread_id is None or not request.url.path.endswith("/diff"):
            return None
        params = request.query_params
        try:
            branches = self.store.branches(thread_id, scope=self.scope)
        except Exception:  # an error page renders whatever else failed, its own reads too
            branches = []
        mode = params.get("mode", "three-dot")
        return {"a": params.get("a", ""), "b": params.get("b", ""), "branches": branches,
                "mode": mode if mode in ("three-dot", "two-dot") else "three-dot"}

    # --- pages --------------------------------------------------------------------------

    def threads(self, request: Request) -> Response:
        """``/``: the threads, the one written to last first, ``?q=`` filtering by id or
        message text, a page of those after the thread ``?before=``; with ``?q=``, the
        messages the store's search finds too, a page from ``?cursor=``."""
        query = request.query_params.get("q", "")
        cursor = request.query_params.get("cursor") or None
        if "after" in request.query_params:
            return self._threads_from_position(request, query, cursor)
        before = request.query_params.get("before") or None
        written = request.query_params.get("at") or None  # before's last write, then
        at = _time(written) if before is not None and written is not None else None
        found = pages.threads_page(
            self.store, query=query, before=before, at=at, scope=self.scope
        )
        hits = pages.search_page(self.store, query, cursor=cursor, scope=self.scope)
        # Each list's "more" link keeps where the other one is. The box and the links keep
        # the query as typed (the search reads it without the white space around it): a
        # character a strip would take, such as U+0085, comes back in the box.
        return self.render(
            request, "threads.html", page=found, search=hits, before=before, at=at,
            cursor=cursor, query=query,
        )

    def _threads_from_position(self, request: Request, query: str, cursor: str | None) -> Response:
        """An older link's page, ``?after=`` threads into the listing: the page after the
        thread now at that place."""
        after = _int(request.query_params.get("after"), 0, "after")
        if after < 0:
            raise HTTPException(400, f"after= is a position (0 or more), not {after}")
        ids = self.store.threads(scope=self.scope, recent_first=True)
        before = ids[min(after, len(ids)) - 1] if after and ids else None
        params = {"q": query or None, "before": before, "cursor": cursor}
        query_string = urlencode({k: v for k, v in params.items() if v is not None})
        root = request.scope.get("root_path", "")
        return RedirectResponse(f"{root}/" + (f"?{query_string}" if query_string else ""), 303)

    async def tree(self, request: Request) -> Response:
        """``/thread?thread=``: the thread's run tree, a page of runs older than ``?before=``;
        ``?rows=1`` renders the rows alone, for the page to append, ``?lanes=`` carrying its
        columns on."""
        thread_id = self.param(request, "thread")
        before = request.query_params.get("before") or None
        columns = _columns(request.query_params.get("lanes"))
        page = pages.tree_page(
            self.store, thread_id, before=before, columns=columns, scope=self.scope
        )
        name = "tree_rows.html" if _flag(request, "rows") else "tree.html"
        rows = pages.tree_rows_html(page.rows, request.scope.get("root_path", ""), thread_id)
        return self.render(
            request, name, rows=rows, page=page, lanes_json=json.dumps(page.next_columns)
        )

    async def tree_poll(self, request: Request) -> Response:
        """``/thread/poll?thread=``: a token that changes when the thread does (a branch moves, a
        run is added or records events), which the tree page polls."""
        thread_id = self.param(request, "thread")
        return JSONResponse({"token": pages.poll_token(self.store, thread_id, self.scope)})

    def run(self, request: Request) -> Response:
        """``/run?thread=&run=``: a run's conversation, state and events (``?all_messages=1``,
        ``?all_events=1``: every one of them; ``?q=``: a long message shown from where that
        search finds it). A live run's page reads this page again to
        update itself."""
        thread_id, run_id = self.param(request, "thread"), self.param(request, "run")
        page = pages.run_page(
            self.store,
            thread_id,
            run_id,
            all_messages=_flag(request, "all_messages"),
            all_events=_flag(request, "all_events"),
            found=request.query_params.get("q", ""),
            scope=self.scope,
        )
        return self.render(request, "run.html", page=page, run=page.run, thread_id=thread_id)

    async def run_poll(self, request: Request) -> Response:
        """``/run/poll?thread=&run=``: a token that changes as the run records events, and its
        status, which a live run's page polls."""
        thread_id, run_id = self.param(request, "thread"), self.param(request, "run")
        run = self.store.get_run(run_id, thread_id=thread_id, scope=self.scope)
        if run is None:
            raise HTTPException(404, f"no run {run_id!r} in thread {thread_id!r}")
        return JSONResponse({"token": pages.run_token(run), "status": run.status})

    def run_changes(self, request: Request) -> Response:
        """``/run/changes?thread=&run=``: what the run changed from its lineage parent (messages,
        state)."""
        thread_id, run_id = self.param(request, "thread"), self.param(request, "run")
        change = pages.state_change(self.store, thread_id, run_id, scope=self.scope)
        views = pages.change_views(
            self.store,
            thread_id,
            change.changes,
            before_run=change.parent.run_id if change.parent is not None else None,
            after_run=change.run.run_id,
            scope=self.scope,
        )
        return self.render(
            request, "run_changes.html", change=change, views=views, thread_id=thread_id
        )

    def run_input(self, request: Request) -> Response:
        """``/run/input?thread=&run=``: the RunAgentInput the run was started with, as JSON."""
        thread_id, run_id = self.param(request, "thread"), self.param(request, "run")
        recorded = self.store.input(run_id, thread_id=thread_id, scope=self.scope)
        return _json(recorded)

    def run_message(self, request: Request) -> Response:
        """``/run/message?thread=&run=&index=``: one message of the run's view, as JSON."""
        thread_id, run_id = self.param(request, "thread"), self.param(request, "run")
        index = _int(self.param(request, "index"), -1, "index")
        messages = self.store.checkout(run_id, thread_id=thread_id, scope=self.scope).messages
        if not 0 <= index < len(messages):
            raise HTTPException(404, f"run {run_id!r} has no message {index}")
        return _json(messages[index])

    def run_event(self, request: Request) -> Response:
        """``/run/event?thread=&run=&index=``: one event of the run, as JSON."""
        thread_id, run_id = self.param(request, "thread"), self.param(request, "run")
        index = _int(self.param(request, "index"), -1, "index")
        events = self.store.events(run_id, thread_id=thread_id, scope=self.scope)
        if not 0 <= index < len(events):
            raise HTTPException(404, f"run {run_id!r} has no event {index}")
        return _json(events[index])

    def diff(self, request: Request) -> Response:
        """``/diff?thread=&a=&b=``: two runs compared (``?mode=two-dot`` or three-dot)."""
        thread_id = self.param(request, "thread")
        a, b = self.param(request, "a"), self.param(request, "b")
        mode = request.query_params.get("mode", "three-dot")
        page = pages.diff_page(self.store, thread_id, a, b, mode=mode, scope=self.scope)
        branches = self.store.branches(thread_id, scope=self.scope)
        return self.render(
            request,
            "diff.html",
            page=page,
            d=page,
            thread_id=thread_id,
            a=a,
            b=b,
            mode=mode,
            branches=branches,
        )

    def fork(self, request: Request) -> Response:
        """``/fork?thread=&run=``: the RunAgentInput that starts a new run from this one, with
        snippets that send it to an agent."""
        thread_id, run_id = self.param(request, "thread"), self.param(request, "run")
        body = self.store.fork(run_id, thread_id=thread_id, scope=self.scope)
        run = self.store.get_run(run_id, thread_id=thread_id, scope=self.scope)
        assert run is not None  # fork found it
        return self.render(
            request,
            "fork.html",
            run=run,
            thread_id=thread_id,
            body=text.dumps(body, indent=2),
            body_size=len(text.dumps(body)),
            agent_url=DEFAULT_AGENT_URL,
            # As the page's script quotes the URL the reader types (static/viewer.js).
            agent_url_python=json.dumps(DEFAULT_AGENT_URL),
            agent_url_shell=shell_command([DEFAULT_AGENT_URL]),
            store_path=self.pasted_store,
            fork_command=_fork_command(run_id, thread_id, self.pasted_store),
        )

    def fork_json(self, request: Request) -> Response:
        """``/fork.json?thread=&run=``: that RunAgentInput, as a JSON download."""
        thread_id, run_id = self.param(request, "thread"), self.param(request, "run")
        body = self.store.fork(run_id, thread_id=thread_id, scope=self.scope)
        return _json(body, download=f"fork-{run_id}.json")

    async def branch_async(self, request: Request) -> Response:
        """Create or move a branch (the one write the viewer makes, with --allow-writes)."""
        if not self.allow_writes:
            raise HTTPException(403, "this viewer is read-only (start it with --allow-writes)")
        # A page of another site may post forms to 127.0.0.1: only this viewer's own pages,
        # which send JSON with their origin, may write.
        origin = request.headers.get("origin")
        host = request.headers.get("host")
        if origin is None or host is None or origin.split("://", 1)[-1] != host:
            raise HTTPException(403, "branches are written only from the viewer's own pages")
        try:
            data = await request.json()
        except (ValueError, RecursionError):  # RecursionError: nested past what is decoded
            raise HTTPException(400, "the body must be JSON") from None
        if not isinstance(data, dict):
            raise HTTPException(400, "the body must be a JSON object")
        thread_id, name, run_id = data.get("thread"), data.get("name"), data.get("run")
        if not (
            isinstance(thread_id, str)
            and isinstance(name, str)
            and isinstance(run_id, str)
            and thread_id
            and name
            and run_id
        ):
            raise HTTPException(400, "the body needs thread, name and run")
        from starlette.concurrency import run_in_threadpool

        made = await run_in_threadpool(
            self.store.branch, name, run_id, thread_id=thread_id, scope=self.scope
        )
        return JSONResponse({"name": made.name, "runId": made.run_id, "threadId": made.thread_id})


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def _short(value: str, width: int = 60) -> str:
    value = " ".join(value.split())
    return value if len(value) <= width else value[: width - 1] + "…"


def _fork_command(run_id: str, thread_id: str, store_path: str) -> str:
    """``agui-store fork`` of the run, as a line to paste (ids that begin with ``-`` given
    so that argparse does not take them for options)."""
    options = [*pasted_option("--thread", thread_id), *pasted_option("--db", store_path)]
    return shell_command(with_positional(["agui-store", "fork"], run_id, options))


def _pasted(path: str) -> str:
    """The store's path as a snippet to paste elsewhere names it: a file's absolute path (a
    relative one names another file in another folder), a URL as it is shown."""
    if is_url(path) or path == ":memory:":
        return path
    return os.path.abspath(path)


#: The endpoints that answer JSON, errors included.
JSON_ENDPOINTS = ("/poll", "/branch", "/run/message", "/run/event", "/run/input", "/fork.json")


def _int(value: str | None, default: int, name: str) -> int:
    """The parameter ``name=``: a whole number in ASCII digits (``int()`` alone also takes
    other scripts' digits, spaces around them and ``_`` between them), at most 18 of them;
    any other value is a 400 that names the parameter."""
    if value is None:
        return default
    if not re.fullmatch(r"-?[0-9]{1,18}", value):
        raise HTTPException(
            400, f"{name}= is a whole number of at most 18 ASCII digits, not {value!r}"
        )
    return int(value)


def _time(value: str) -> int:
    """``at=``: a time in milliseconds since the epoch, one a calendar date holds (a link
    edited past the year 9999 is a 400 that says so, not a failure of the page)."""
    ms = _int(value, 0, "at")
    try:
        when(ms)
    except (ValueError, OverflowError, OSError):
        raise HTTPException(
            400, f"at= is a time in milliseconds since 1970, up to the year 9999, not {value!r}"
        ) from None
    return ms


def _flag(request: Request, name: str) -> bool:
    """Whether the switch ``?name=1`` is on: ``0``, empty or absent is off (``bool`` of the
    text would count ``0`` as on), and any other value is a 400 that says so."""
    value = request.query_params.get(name, "")
    if value not in ("", "0", "1"):
        raise HTTPException(400, f"{name}= is 1 (on) or 0 (off), not {value!r}")
    return value == "1"


def _columns(value: str | None) -> list[str | None]:
    if not value:
        return []
    try:
        columns = json.loads(value)
    except (ValueError, RecursionError):  # lists nested past what the decoder reads
        raise HTTPException(400, "lanes= must be a JSON list") from None
    if not isinstance(columns, list) or not all(c is None or isinstance(c, str) for c in columns):
        raise HTTPException(400, "lanes= must be a JSON list of run ids and nulls")
    return columns


def _json(value: Any, *, download: str | None = None) -> Response:
    body = text.dumps(value, indent=2).encode("utf-8")
    headers = {"Content-Disposition": _attachment(download)} if download else None
    return Response(body, media_type="application/json", headers=headers)


def _attachment(filename: str) -> str:
    """A ``Content-Disposition`` that names a download whatever its characters: a run id
    may hold quotes, line breaks or any script. Browsers take the UTF-8 name (RFC 6266's
    ``filename*``); the plain one, with every other character as ``_``, is for the rest."""
    plain = _NOT_PLAIN_IN_A_FILENAME.sub("_", filename)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"


_NOT_PLAIN_IN_A_FILENAME = re.compile(r"[^A-Za-z0-9._-]")


class _Assets(StaticFiles):
    """The viewer's stylesheet and scripts. A file it does not have (or a method it does not
    take) is the viewer's page saying so, its links made from the viewer's root path, not
    from the mount's below it (which would point them at ``/static/static``)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except HTTPException:
            # The error page reads this same scope: the router updates it in place.
            scope["root_path"] = scope["root_path"].removesuffix("/static")
            raise


def routes(viewer: Viewer) -> list[Any]:
    """The viewer's routes, the static assets included."""
    return [
        Route("/", viewer.threads),
        Route("/thread", viewer.tree),
        Route("/thread/poll", viewer.tree_poll),
        Route("/run", viewer.run),
        Route("/run/poll", viewer.run_poll),
        Route("/run/changes", viewer.run_changes),
        Route("/run/input", viewer.run_input),
        Route("/run/message", viewer.run_message),
        Route("/run/event", viewer.run_event),
        Route("/diff", viewer.diff),
        Route("/fork", viewer.fork),
        Route("/fork.json", viewer.fork_json),
        Route("/branch", viewer.branch_async, methods=["POST"]),
        Mount("/static", app=_Assets(directory=HERE / "static"), name="static"),
    ]


#: The names of this machine's loopback interface: what a browser on it puts in ``Host``.
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})

#: Addresses that listen on every interface: the viewer then answers any ``Host``.
EVERY_INTERFACE = frozenset({"0.0.0.0", "::", ""})


def host_name(header: str) -> str:
    """The host a ``Host`` header names, without its port, brackets or trailing dot."""
    name = header.strip().lower()
    if name.startswith("["):  # an IPv6 literal: [::1]:8642
        name = name[1:].split("]", 1)[0]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    return name.rstrip(".")


class OnlyHosts:
    """Refuses a request whose ``Host`` header names none of ``names`` (a 421, nothing
    read). A page of another site can rename its own host to 127.0.0.1 in the browser's
    DNS (DNS rebinding); its requests then reach a viewer on this machine as same-origin
    ones, but still carry the other site's name in ``Host``."""

    def __init__(self, app: Any, names: frozenset[str]) -> None:
        self.app = app
        self.names = names

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if host_name(header) not in self.names:
                shown = ", ".join(sorted(self.names))
                response = Response(
                    f"this viewer answers requests to {shown} only, not to "
                    f"{text.printable(header)!r}\n",
                    status_code=421, media_type="text/plain",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def served_on(app: Any, host: str) -> Any:
    """``app`` as served on ``host``: answering only the names of that host and of the
    loopback interface, unless it listens on every interface (its user chose to let others
    reach it)."""
    if host.strip("[]") in EVERY_INTERFACE:
        return app
    return OnlyHosts(app, LOOPBACK_NAMES | {host_name(host)})


def build(
    store: Store,
    *,
    scope: str | None = None,
    allow_writes: bool = False,
    title: str | None = None,
) -> Starlette:
    """The viewer as a Starlette app (see :func:`agui_store.ui.app`)."""
    # A viewer of one owner's threads serves that owner, in someone's app: where the app
    # keeps its store (a path, a server's address) is the app's, and no page names it.
    private = scope is not None
    viewer = Viewer(
        store, scope=scope, allow_writes=allow_writes,
        title=title or ("agui-store" if private else f"agui-store · {store.path}"),
    )

    # The store's path as an error names it, whole (a path "db" is not the "db" of "mydb").
    store_named = re.compile(
        "|".join(rf"(?<![\w./-]){re.escape(p)}(?![\w./-])"
                 for p in sorted({_pasted(store.path), store.path}, key=len, reverse=True))
    )

    def error_page(
        request: Request, status: int, message: str, headers: Mapping[str, str] | None = None
    ) -> Response:
        if private:
            message = store_named.sub("the store", message)
        if request.url.path.endswith(JSON_ENDPOINTS):  # a script or a download reads it
            return JSONResponse(
                {"error": text.printable(message)}, status_code=status, headers=headers
            )
        thread_id = viewer.existing_thread(request)
        page = viewer.render(
            request, "error.html", status=status, status_code=status, message=message,
            thread_id=thread_id, compare=viewer.comparison(request, thread_id),
        )
        page.headers.update(headers or {})
        return page

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404 and exc.detail == HTTPStatus.NOT_FOUND.phrase:
            # Starlette's own 404, for a path no route or static file serves: the page says
            # which path, as the viewer's own 404s name what they did not find.
            return error_page(request, 404, f"no page at {_short(request.url.path, 80)}")
        if exc.status_code == 405 and exc.detail == HTTPStatus.METHOD_NOT_ALLOWED.phrase:
            # Starlette's own 405 names neither the page nor the methods its Allow header
            # (kept on the answer, as HTTP asks) lists.
            allowed = ", ".join(sorted((exc.headers or {}).get("Allow", "").split(", ")))
            message = f"{_short(request.url.path, 80)} takes {allowed}, not {request.method}"
            return error_page(request, 405, message, exc.headers)
        return error_page(request, exc.status_code, str(exc.detail), exc.headers)

    async def store_error(request: Request, exc: Exception) -> Response:
        # Another owner's thread is absent, as a missing one: the same 404
        # (docs/design/behaviour.md#live-recording).
        if isinstance(exc, RunNotFoundError):
            return error_page(request, 404, str(exc))
        if isinstance(exc, (AmbiguousRunError, InvalidArgumentError, BranchError)):
            return error_page(request, 400, str(exc))
        return error_page(request, 500, f"{type(exc).__name__}: {exc}")

    app = Starlette(
        routes=routes(viewer),
        exception_handlers={HTTPException: http_error, AguiStoreError: store_error},
    )
    app.state.viewer = viewer
    return app
