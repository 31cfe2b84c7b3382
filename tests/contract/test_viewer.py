"""The web viewer on every backend: a scoped run page shows the run's checkout, the thread's
tree lists its runs, and another owner's thread is a 404 (the pages in detail are in
tests/test_ui.py)."""

from __future__ import annotations

import agui_store
import agui_store.ui
from tests.ui_pages import (
    assert_run_page_shows_checkout,
    client_of,
    get,
    one_run,
    said,
    url,
)


def test_the_viewer_shows_a_store_on_every_backend(store_location: str) -> None:
    with agui_store.open(store_location) as store:
        store.append(one_run("t", "r0", said("u", "hello", "user")), scope="alice")
        store.append(one_run("t", "r1", said("a", "hi back")), scope="alice")
        client = client_of(store, scope="alice")
        assert_run_page_shows_checkout(client, store, "t", "r1")
        rows = get(client, "/thread", thread="t").find_all("run-row")
        assert [r.attrs["data-run"] for r in rows] == ["r1", "r0"]
        assert client.get(url("/thread", thread="t")).status_code == 200
        assert client_of(store, scope="bob").get(url("/thread", thread="t")).status_code == 404
