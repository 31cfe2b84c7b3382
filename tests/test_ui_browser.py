"""The viewer in a real headless Chromium, served by a real uvicorn on 127.0.0.1.

One browser for the module; one server per test. Every wait is for something the page must
come to show; nothing is timed.
"""

from __future__ import annotations

import ast
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

import agui_store
import agui_store.ui
from agui_store.cli.demo import record_demo
from tests.ui_browser import (
    REQUIRE_BROWSER,
    browser_unavailable,
    page_ready,
    script_errors,
    serving,
    start_chromium,
    wait_until,
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = browser_unavailable()
    if reason:
        if REQUIRE_BROWSER:
            pytest.fail(f"required in CI (AGUI_STORE_REQUIRE_BROWSER=1): {reason}")
        pytest.skip(reason)
    driver = start_chromium()
    yield driver
    driver.quit()


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[agui_store.Store, str]]:
    with agui_store.open(tmp_path / "demo.db") as store:
        thread, _ = record_demo(store)
        yield store, thread


def css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def css_all(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def visit(driver: Any, base: str, path: str, **params: str) -> None:
    driver.get(f"{base}{path}" + (f"?{urlencode(params)}" if params else ""))
    wait_until(driver, page_ready, f"{path} ran its script")


def record_empty_runs(store: agui_store.Store, count: int) -> None:
    """``count`` runs of thread ``t`` that say nothing (``r0`` ...): more than a screen."""
    for i in range(count):
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": f"r{i}"},
                      {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{i}"}])


def rows(driver: Any) -> list[str]:
    """The run tree's rows, read in one script so that a live update of the tree cannot
    replace them halfway through the reading."""
    return list(driver.execute_script(
        "return Array.from(document.querySelectorAll('tr.run-row'), r => r.dataset.run)"))


def test_every_page_loads_in_chromium_without_a_script_error(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store)) as base:
        script_errors(browser)  # what earlier tests left in the log
        for path, params in [("/", {}), ("/thread", {"thread": thread}),
                             ("/run", {"thread": thread, "run": "run-2"}),
                             ("/diff", {"thread": thread, "a": "porto", "b": "fahrenheit"}),
                             ("/fork", {"thread": thread, "run": "run-1"})]:
            visit(browser, base, path, **params)
            assert css(browser, "main h1").text, path
            assert script_errors(browser) == [], path
        # The run page loads what the run changed after it opens.
        visit(browser, base, "/run", thread=thread, run="run-2")
        wait_until(browser, lambda d: css_all(d, "#changes .patch"), "the state patch loaded")
        assert json.loads(css(browser, "#changes .patch").text) == [
            {"op": "add", "path": "/cities/1", "value": "Porto"}
        ]
        tree_keys = [k.text for k in css_all(browser, "#state > .json-tree .jt-key")]
        assert tree_keys[:2] == ["cities:", "0:"]


def test_the_run_tree_of_a_branched_thread_draws_each_branch_in_its_own_lane(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    store.append([{"type": "RUN_STARTED", "threadId": thread, "runId": "run-4"},
                  {"type": "RUN_FINISHED", "threadId": thread, "runId": "run-4"}],
                 parent="run-2")
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/thread", thread=thread)
        assert rows(browser) == ["run-4", "run-3", "run-2", "run-1"]
        dots = {row.get_attribute("data-run"): int(float(
            row.find_element("css selector", "circle").get_attribute("cx")))
            for row in css_all(browser, "tr.run-row")}
        # run-4 continues porto's line (run-2); fahrenheit's run-3 is a lane of its own.
        assert dots["run-4"] == dots["run-2"] == dots["run-1"] != dots["run-3"]
        refs = {row.get_attribute("data-run"): [r.text for r in row.find_elements(
            "css selector", ".run-id .ref")] for row in css_all(browser, "tr.run-row")}
        # A run recorded on top of a branch's tip moves the branch along.
        assert refs == {"run-4": ["main", "porto"], "run-3": ["fahrenheit"], "run-2": [],
                        "run-1": []}
        fork_point = css(browser, 'tr[data-run="run-1"] .fork-point')
        assert "2" in fork_point.text


def test_an_open_threads_page_says_so_when_its_thread_is_erased_and_stops_asking(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/thread", thread=thread)
        script_errors(browser)  # what earlier tests left in the log
        store.delete_thread(thread)
        wait_until(browser, lambda d: css_all(d, "#gone"), "the page noticed the erasure")
        assert "no longer in the store" in css(browser, "#gone").text
        assert css(browser, "#live").get_attribute("hidden") is not None
        # The browser logs the one poll that found the thread gone, and no poll after it.
        refused = script_errors(browser)
        assert len(refused) == 1 and "/thread/poll" in refused[0] and "404" in refused[0]
        time.sleep(3 * 1.5)  # three of the page's polling intervals
        assert script_errors(browser) == []


def test_ticking_two_runs_and_diffing_them_shows_their_merge_base_and_each_sides_changes(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/thread", thread=thread)
        css(browser, 'input.pick-run[value="run-2"]').click()
        css(browser, 'input.pick-run[value="run-3"]').click()
        assert css(browser, "#cmp-a").get_attribute("value") == "run-2"
        assert css(browser, "#cmp-b").get_attribute("value") == "run-3"
        css(browser, "#cmp-go").click()
        wait_until(browser, lambda d: "/diff" in d.current_url and page_ready(d), "the diff page")
        expected = store.diff("run-2", "run-3", thread_id=thread)
        assert css(browser, "#merge-base").text == "run-1"
        sides = css_all(browser, "section.side")
        assert len(sides) == 2
        for side, change in zip(sides, [expected.a_changes, expected.changes]):
            assert change is not None
            shown = [c.get_attribute("data-id") for c in side.find_elements(
                "css selector", ".change")]
            assert shown == [m.id for m in change.messages]
        assert "Can you give me that in Fahrenheit?" in sides[1].text
        # The form's dots follow the mode chosen, before it is sent.
        assert css(browser, "form.compare .dots").text == "..."
        from selenium.webdriver.support.ui import Select

        Select(css(browser, "form.compare select[name=mode]")).select_by_value("two-dot")
        assert css(browser, "form.compare .dots").text == ".."


def test_the_diff_pages_form_is_not_sent_with_a_side_left_empty(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/diff", thread=thread, a="run-2", b="run-3")
        for side in ("a", "b"):
            field = css(browser, f"form.compare input[name={side}]")
            kept = field.get_attribute("value")
            field.clear()
            assert browser.execute_script(
                "return document.querySelector('form.compare').checkValidity()") is False
            assert browser.execute_script("return arguments[0].validity.valueMissing", field)
            field.send_keys(kept)
        assert browser.execute_script(
            "return document.querySelector('form.compare').checkValidity()") is True


def test_fork_from_here_shows_the_input_fork_returns_with_calls_that_send_it(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/thread", thread=thread)
        css(browser, 'tr[data-run="run-1"] td.actions a[href*="/fork"]').click()
        wait_until(browser, lambda d: "/fork" in d.current_url and page_ready(d), "the fork page")
        shown = json.loads(css(browser, "#fork-body").text)
        expected = store.fork("run-1", thread_id=thread)
        assert {**shown, "runId": None} == {**expected, "runId": None}
        field = css(browser, "#agent-url")
        field.clear()
        field.send_keys("http://127.0.0.1:9999/my-agent")
        for snippet in ("#python-call", "#http-call"):
            assert "http://127.0.0.1:9999/my-agent" in css(browser, snippet).text
        assert "store.fork('run-1'" in css(browser, "#python-call").text
        assert "curl -N -X POST" in css(browser, "#http-call").text


def test_with_writes_allowed_a_branch_is_created_from_the_fork_page(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store, allow_writes=True)) as base:
        visit(browser, base, "/fork", thread=thread, run="run-1")
        css(browser, "form.branch-form input[name=name]").send_keys("from-lisbon")
        css(browser, "form.branch-form button").click()
        wait_until(browser, lambda d: "from-lisbon" in css(d, ".branch-result").text,
                   "the branch was made")
    assert {b.name: b.run_id for b in store.branches(thread)}["from-lisbon"] == "run-1"


def test_a_branch_form_whose_viewer_stopped_says_no_branch_was_made(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store, allow_writes=True)) as base:
        visit(browser, base, "/fork", thread=thread, run="run-1")
    css(browser, "form.branch-form input[name=name]").send_keys("from-lisbon")
    css(browser, "form.branch-form button").click()
    shown = wait_until(browser, lambda d: css(d, ".branch-result").text, "an answer")
    assert shown.startswith("no branch made: the viewer did not answer"), shown
    assert "failed" in css(browser, ".branch-result").get_attribute("class")
    assert "from-lisbon" not in {b.name for b in store.branches(thread)}


def test_a_read_only_viewer_offers_no_branch_form(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/fork", thread=thread, run="run-1")
        assert css_all(browser, "form.branch-form") == []


def test_older_runs_load_below_the_first_screen_without_a_reload(
    browser: Any, tmp_path: Path
) -> None:
    with agui_store.open(tmp_path / "long.db") as store:
        record_empty_runs(store, 60)
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/thread", thread="t")
            assert len(rows(browser)) == 50
            browser.execute_script("window.keptAcrossUpdates = 1")
            css(browser, "button.more").click()
            wait_until(browser, lambda d: len(rows(d)) == 60, "the older runs")
            assert rows(browser) == [f"r{i}" for i in reversed(range(60))]
            assert browser.execute_script("return window.keptAcrossUpdates") == 1


def test_script_in_recorded_text_never_runs_in_the_browser(
    browser: Any, tmp_path: Path
) -> None:
    evil = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    with agui_store.open(tmp_path / "evil.db") as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": evil},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"x": evil}},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ])
        with serving(agui_store.ui.app(store)) as base:
            for path, params in [("/thread", {"thread": "t"}),
                                 ("/run", {"thread": "t", "run": "r"}),
                                 ("/diff", {"thread": "t", "a": "r", "b": "r"})]:
                visit(browser, base, path, **params)
                assert browser.execute_script("return window.pwned") is None, path
            visit(browser, base, "/run", thread="t", run="r")
            assert css(browser, "#conversation .msg-text").text == evil


def test_the_state_tree_shows_each_number_as_stored_even_past_what_a_double_holds_exactly(
    browser: Any, tmp_path: Path
) -> None:
    state = {"order_id": 12345678901234567891, "snowflake": 1234567890123456789,
             "price": 1.1, "whole": 2.0, "small": 7, "negative": -9007199254740993}
    with agui_store.open(tmp_path / "numbers.db") as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "STATE_SNAPSHOT", "snapshot": state},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ])
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread="t", run="r")
            shown = [leaf.text for leaf in css_all(browser, "#state .jt-leaf")]
    assert shown == [f"{key}: {json.dumps(value)}" for key, value in sorted(state.items())]


def test_control_and_bidi_characters_in_stored_text_show_as_escapes_and_reorder_nothing(
    browser: Any, tmp_path: Path
) -> None:
    """A right-to-left override in a run id would turn the page's own labels around it
    ("finished" after the id reads backwards); an escape sequence or a NUL shows as a box.
    The page shows each as its escape, as the command line does, in server-rendered text
    and in what the page's script builds (the state's tree)."""
    run_id = "rtl-\u202erun"
    with agui_store.open(tmp_path / "bidi.db") as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a\x1b[31mred\x00 \u2066x"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"k\u202e": "v\u0085"}},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
        ])
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread="t", run=run_id)
            assert "rtl-\\u202erun" in css(browser, "main h1").text
            assert css(browser, "#conversation .msg-text").text == "a\\x1b[31mred\\x00 \\u2066x"
            tree = css(browser, ".json-tree[data-source=state-data]").text
            assert "k\\u202e" in tree and "\\x85" in tree
            body = browser.execute_script("return document.body.innerText")
            assert not any(c in body for c in "\u202e\x1b\x00\u2066\u0085")
            # The ids the page's script sends back stay as stored: its links still work.
            visit(browser, base, "/thread", thread="t")
            assert rows(browser) == [run_id]
            assert "rtl-\\u202erun" in css(browser, "tr.run-row").text


def test_long_unbroken_ids_wrap_and_never_widen_a_page_past_the_window(
    browser: Any, tmp_path: Path
) -> None:
    thread, run_id, message = "7f" * 64 + "y" * 1900, "r" * 500, "m" * 200  # ids of at most 2,048 B
    child = "c" * 300
    with agui_store.open(tmp_path / "long.db") as store:
        for run, parent, said in ((run_id, None, "hello there"), (child, run_id, "and again")):
            store.append([
                {"type": "RUN_STARTED", "threadId": thread, "runId": run},
                {"type": "TEXT_MESSAGE_START", "messageId": message + said, "role": "user"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": message + said, "delta": said},
                {"type": "TEXT_MESSAGE_END", "messageId": message + said},
                {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
            ], parent=parent)
        store.branch("b" * 150, run_id, thread_id=thread)
        pages = [("/", {}), ("/", {"q": "hello"}), ("/thread", {"thread": thread}),
                 ("/run", {"thread": thread, "run": run_id}),
                 ("/run", {"thread": thread, "run": child}),
                 ("/diff", {"thread": thread, "a": run_id, "b": child}),
                 ("/fork", {"thread": thread, "run": child})]
        with serving(agui_store.ui.app(store)) as base:
            for width in (1400, 375):
                browser.set_window_size(width, 1000)
                for path, params in pages:
                    visit(browser, base, path, **params)
                    wide, window = browser.execute_script(
                        "return [document.documentElement.scrollWidth, window.innerWidth]"
                    )
                    assert wide <= window, (width, path, params, wide, window)
            browser.set_window_size(1400, 1000)


#: The texts of the elements a selector finds that the page shows on more than one line.
BROKEN_ACROSS_LINES = """const out = [];
  for (const element of document.querySelectorAll(arguments[0])) {
    const range = document.createRange(); range.selectNodeContents(element);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (tops.size > 1) out.push(element.textContent.trim());
  }
  return out;"""


def test_numbers_times_and_event_types_are_never_broken_across_lines(
    browser: Any, tmp_path: Path
) -> None:
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "long"}]
    for i in range(40):
        events += [
            {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": "an answer " * 40},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
        ]
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "long"})
    with agui_store.open(tmp_path / "numbers.db") as store:
        store.append(events)
        for i in range(1000):
            store.append([{"type": "RUN_STARTED", "threadId": "busy", "runId": f"b{i}"},
                          {"type": "RUN_FINISHED", "threadId": "busy", "runId": f"b{i}"}])
        pages = [("/", {}, "table.threads td.num, table.threads td.time"),
                 ("/", {"q": "answer"}, ".hit .time"),
                 ("/thread", {"thread": "busy"}, "table.tree td.num, table.tree td.time"),
                 ("/run", {"thread": "t", "run": "long"}, "table.event-list td.num, .etype")]
        with serving(agui_store.ui.app(store)) as base:
            try:
                for width in (1400, 375):
                    browser.set_window_size(width, 1000)
                    for path, params, cells in pages:
                        visit(browser, base, path, **params)
                        assert css_all(browser, cells), (path, cells)
                        broken = browser.execute_script(BROKEN_ACROSS_LINES, cells)
                        assert broken == [], (width, path)
            finally:
                browser.set_window_size(1400, 1000)


def test_branch_and_fork_point_badges_are_never_broken_inside_a_word_on_a_phone(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo  # branches main, porto and fahrenheit; run-1 a fork point
    pages = [("/", {}), ("/", {"q": "weather"}), ("/thread", {"thread": thread}),
             ("/run", {"thread": thread, "run": "run-3"})]
    with serving(agui_store.ui.app(store)) as base:
        try:
            for width in (1400, 390):
                browser.set_window_size(width, 1000)
                for path, params in pages:
                    visit(browser, base, path, **params)
                    assert css_all(browser, ".ref"), path
                    broken = browser.execute_script(BROKEN_ACROSS_LINES, ".ref, .fork-point")
                    assert broken == [], (width, path)
        finally:
            browser.set_window_size(1400, 1000)


#: How many characters of its payload's monospace font each event's payload cell is wide.
PAYLOAD_CHARACTERS = """const out = [];
  for (const cell of document.querySelectorAll('table.event-list td.payload')) {
    const probe = document.createElement('pre');
    probe.style.cssText = 'position: absolute; visibility: hidden; white-space: pre';
    probe.textContent = 'x'.repeat(100);
    cell.appendChild(probe);
    out.push(cell.clientWidth / (probe.getBoundingClientRect().width / 100));
    probe.remove();
  }
  return out;"""


def test_an_events_payload_keeps_room_for_its_json_on_a_phone(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store)) as base:
        try:
            for width in (1400, 390):  # a window is never narrower than 500 px: emulated
                browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                    "width": width, "height": 844, "deviceScaleFactor": 1, "mobile": True})
                visit(browser, base, "/run", thread=thread, run="run-3")
                assert browser.execute_script("return window.innerWidth") == width
                widths = browser.execute_script(PAYLOAD_CHARACTERS)
                assert widths and min(widths) >= 24, (width, widths)
                page, window = browser.execute_script(
                    "return [document.documentElement.scrollWidth, window.innerWidth]"
                )
                assert page <= window, (width, page, window)  # the table scrolls inside
        finally:
            browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_a_tree_wider_than_the_window_scrolls_inside_itself_and_keeps_hashes_whole(
    browser: Any, tmp_path: Path
) -> None:
    with agui_store.open(tmp_path / "fan.db") as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "root"},
                      {"type": "RUN_FINISHED", "threadId": "t", "runId": "root"}])
        for i in range(60):  # a run retried 60 times: a lane each
            store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": f"retry-{i}"},
                          {"type": "RUN_FINISHED", "threadId": "t", "runId": f"retry-{i}"}],
                         parent="root")
        with serving(agui_store.ui.app(store)) as base:
            try:
                for width in (1400, 375):
                    browser.set_window_size(width, 1000)
                    visit(browser, base, "/thread", thread="t")
                    page, window, tree, shown = browser.execute_script(
                        "const s = document.querySelector('.tree-scroll');"
                        "return [document.documentElement.scrollWidth, window.innerWidth,"
                        " s.scrollWidth, s.clientWidth]"
                    )
                    assert page <= window, (width, page, window)
                    assert tree > shown, (width, tree, shown)  # it scrolls, inside
                    broken = browser.execute_script(BROKEN_ACROSS_LINES, "code.hash")
                    assert broken == [], width
            finally:
                browser.set_window_size(1400, 1000)


def test_a_live_run_appears_in_the_tree_and_fills_its_page_while_a_recorder_writes_it(
    browser: Any, demo: tuple[agui_store.Store, str], tmp_path: Path
) -> None:
    store, thread = demo
    resume = threading.Event()

    def producer() -> Iterator[dict[str, Any]]:
        yield {"type": "RUN_STARTED", "threadId": thread, "runId": "live-1"}
        yield {"type": "TEXT_MESSAGE_START", "messageId": "live-a", "role": "assistant"}
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "live-a", "delta": "first words"}
        resume.wait()
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "live-a", "delta": " and the rest"}
        yield {"type": "TEXT_MESSAGE_END", "messageId": "live-a"}
        yield {"type": "RUN_FINISHED", "threadId": thread, "runId": "live-1"}

    def record() -> None:
        # The recorder's own store on the same file, as a server process would hold it.
        with agui_store.open(store.path) as writer:
            for _ in writer.record(producer()):
                pass

    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/thread", thread=thread)
        browser.execute_script("window.keptAcrossUpdates = 1")
        recorder = threading.Thread(target=record, name="recorder")
        recorder.start()
        try:
            wait_until(browser, lambda d: "live-1" in rows(d), "the live run in the tree")
            row = css(browser, 'tr[data-run="live-1"]')
            assert row.get_attribute("data-status") == "incomplete"
            assert "open" in row.find_element("css selector", ".status").text
            assert browser.execute_script("return window.keptAcrossUpdates") == 1
            row.find_element("css selector", ".run-id a").click()
            wait_until(browser, lambda d: "/run" in d.current_url and page_ready(d), "its page")
            assert "first words" in css(browser, "#conversation").text
            browser.execute_script("window.keptAcrossUpdates = 2")
        finally:
            resume.set()
            recorder.join()
        wait_until(browser, lambda d: css(d, "#run h1 .status").text == "finished",
                   "the run finished on its page")
        assert "first words and the rest" in css(browser, "#conversation").text
        types = [r.get_attribute("data-type") for r in css_all(browser, "#event-rows tr.event")]
        assert types[-1] == "RUN_FINISHED"
        assert browser.execute_script("return window.keptAcrossUpdates") == 2


def open_run(thread: str, run_id: str, *words: str) -> list[dict[str, Any]]:
    """The first events of a run still being recorded: an assistant message, started."""
    return [{"type": "RUN_STARTED", "threadId": thread, "runId": run_id},
            {"type": "TEXT_MESSAGE_START", "messageId": f"{run_id}-a", "role": "assistant"},
            *({"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run_id}-a", "delta": w}
              for w in words)]


def shown_event_types(driver: Any) -> list[str]:
    return [row.get_attribute("data-type") for row in css_all(driver, "#event-rows tr.event")
            if row.is_displayed()]


def filter_boxes(driver: Any) -> dict[str, bool]:
    return {box.get_attribute("value"): box.is_selected()
            for box in css_all(driver, "#event-filter input")}


def test_a_live_run_page_shows_event_types_first_recorded_after_it_opened_each_with_its_box(
    browser: Any, tmp_path: Path
) -> None:
    with agui_store.open(tmp_path / "live.db") as store:
        store.append(open_run("t", "r", "first words"))
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread="t", run="r")
            assert list(filter_boxes(browser)) == [
                "RUN_STARTED", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_START"]
            css(browser, '#event-filter input[value="TEXT_MESSAGE_START"]').click()
            store.append([{"type": "TEXT_MESSAGE_END", "messageId": "r-a"},
                          {"type": "STATE_SNAPSHOT", "snapshot": {"done": True}},
                          {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}],
                         thread_id="t", run_id="r")
            wait_until(browser, lambda d: css(d, "#run h1 .status").text == "finished",
                       "the run finished on its page")
            wait_until(browser, lambda d: len(filter_boxes(d)) == 6, "a box for each type")
            # The new types are shown and ticked; the type the reader hid stays hidden.
            assert filter_boxes(browser) == {
                "RUN_FINISHED": True, "RUN_STARTED": True, "STATE_SNAPSHOT": True,
                "TEXT_MESSAGE_CONTENT": True, "TEXT_MESSAGE_END": True,
                "TEXT_MESSAGE_START": False}
            assert shown_event_types(browser) == [
                "RUN_STARTED", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STATE_SNAPSHOT",
                "RUN_FINISHED"]
            css(browser, '#event-filter input[value="STATE_SNAPSHOT"]').click()
            assert "STATE_SNAPSHOT" not in shown_event_types(browser)


def test_a_live_run_page_shows_the_runs_facts_state_and_changes_as_recorded_when_it_ends(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    store.append(open_run(thread, "live-1", "Faro is"), parent="run-2")
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/run", thread=thread, run="live-1")
        wait_until(browser, lambda d: css_all(d, "#changes .patch, #changes p"),
                   "what the run changed loaded")
        assert "recorded so far" in css(browser, "#run .facts-grid").text
        browser.execute_script("window.keptAcrossUpdates = 1")
        store.append([
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "live-1-a", "delta": " sunny."},
            {"type": "TEXT_MESSAGE_END", "messageId": "live-1-a"},
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/cities/-", "value": "Faro"}]},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": "live-1"},
        ], thread_id=thread, run_id="live-1")  # fmt: skip
        run = store.get_run("live-1", thread_id=thread)
        assert run is not None and run.status == "finished"
        change = store.diff("run-2", "live-1", thread_id=thread, mode="two-dot")
        wait_until(browser, lambda d: css_all(d, "#changes .patch") and json.loads(
            css(d, "#changes .patch").text) == change.state_patch, "the state's change")
        wait_until(browser, lambda d: css(d, "#run h1 .status").text == "finished",
                   "the run finished on its page")
        facts = dict(zip([t.text for t in css_all(browser, "#run .facts-grid dt")],
                         [d.text for d in css_all(browser, "#run .facts-grid dd")]))
        assert facts["events"] == str(run.event_count)
        assert facts["hash"] == run.short_hash
        assert " \N{EN DASH} " in facts["recorded"]  # from the first event's time to the last's
        after = store.checkout("live-1", thread_id=thread)
        assert f"{len(after.messages)} messages" in css(browser, "section.conversation h2").text
        assert "Faro is sunny." in css(browser, "#conversation").text
        cities = [k.text for k in css_all(browser, "#state .jt-node .jt-node .jt-leaf")]
        assert cities == [f"{i}: {json.dumps(c)}" for i, c in enumerate(after.state["cities"])]
        changed = [c.text for c in css_all(browser, "#changes .change .mid")]
        assert changed == [m.id for m in change.messages]
        assert browser.execute_script("return window.keptAcrossUpdates") == 1


def test_a_live_run_page_asked_for_every_message_and_event_keeps_them_and_its_target(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agui_store.ui.pages, "EVENTS_SHOWN", 20)
    events = [{"type": "RUN_STARTED", "threadId": "t", "runId": "big"}]
    for i in range(agui_store.ui.pages.MESSAGES_SHOWN + 10):
        events += [{"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
                   {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": f"words {i}"},
                   {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"}]
    with agui_store.open(tmp_path / "live.db") as store:
        store.append(events)
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread="t", run="big")
            css(browser, "p.earlier a").click()
            wait_until(browser, lambda d: "all_messages=1" in d.current_url and page_ready(d),
                       "every message")
            css(browser, "#event-rows a[href*=all_events]").click()
            wait_until(browser, lambda d: "all_events=1" in d.current_url and page_ready(d),
                       "every event")
            assert "all_messages=1" in browser.current_url  # each choice keeps the other
            browser.get(browser.current_url.split("#")[0] + "#msg-2")
            target = "return document.querySelector(':target')?.id"
            assert browser.execute_script(target) == "msg-2"
            rows_before = len(css_all(browser, "#event-rows tr.event"))
            assert rows_before == 1 + 3 * (agui_store.ui.pages.MESSAGES_SHOWN + 10)
            store.append([{"type": "TEXT_MESSAGE_START", "messageId": "last", "role": "user"},
                          {"type": "TEXT_MESSAGE_CONTENT", "messageId": "last",
                           "delta": "one more"}], thread_id="t", run_id="big")
            wait_until(browser, lambda d: "one more" in css(d, "#conversation").text,
                       "the new message")
            shown = len(store.checkout("big", thread_id="t").messages)
            assert len(css_all(browser, "#conversation .msg")) == shown
            assert css_all(browser, "p.earlier") == []
            assert len(css_all(browser, "#event-rows tr.event")) == rows_before + 2
            assert css_all(browser, "#event-rows a[href*=all_events]") == []
            assert browser.execute_script(target) == "msg-2"


def test_the_live_run_tree_keeps_the_older_runs_loaded_and_their_ticks_as_it_updates(
    browser: Any, tmp_path: Path
) -> None:
    with agui_store.open(tmp_path / "long.db") as store:
        record_empty_runs(store, 60)
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/thread", thread="t")
            css(browser, "button.more").click()
            wait_until(browser, lambda d: len(rows(d)) == 60, "the older runs")
            css(browser, 'input.pick-run[value="r3"]').click()
            store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r60"}])
            wait_until(browser, lambda d: "r60" in rows(d), "the new run")
            assert rows(browser) == [f"r{i}" for i in reversed(range(61))]
            # The open run r60 keeps the tree updating, so each reading is one script.
            assert browser.execute_script(
                "return document.querySelector('input.pick-run[value=\"r3\"]').checked")
            assert css(browser, "#cmp-a").get_attribute("value") == "r3"
            assert css_all(browser, "button.more") == []


def test_the_live_run_tree_names_the_branches_as_they_are_now_in_its_heading_and_compare_form(
    browser: Any, tmp_path: Path
) -> None:
    with agui_store.open(tmp_path / "branches.db") as store:
        record_empty_runs(store, 3)
        for name, run_id in (("kept", "r0"), ("erased", "r1"), ("old-name", "r2")):
            store.branch(name, run_id, thread_id="t")
        shown = """return [
          Array.from(document.querySelectorAll('#tree .facts a.ref'), a => a.textContent),
          Array.from(document.querySelectorAll('#refs option'), o => o.value)]"""
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/thread", thread="t")
            before = ["main", "erased", "kept", "old-name"]
            assert browser.execute_script(shown) == [before, before]
            store.delete_branch("erased", thread_id="t")
            store.rename_branch("old-name", "new-name", thread_id="t")
            store.branch("made-since", "r0", thread_id="t")
            now = ["main", "kept", "made-since", "new-name"]
            wait_until(browser, lambda d: d.execute_script(shown)[0] == now, "the branches now")
            assert browser.execute_script(shown) == [now, now]
            assert css(browser, "#live").is_displayed()


def test_the_live_run_tree_keeps_what_the_reader_typed_in_its_compare_form_as_it_updates(
    browser: Any, tmp_path: Path
) -> None:
    with agui_store.open(tmp_path / "typed.db") as store:
        record_empty_runs(store, 3)
        store.branch("feature", "r1", thread_id="t")
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/thread", thread="t")
            css(browser, "#cmp-a").send_keys("feature")
            css(browser, "#cmp-b").send_keys("r0")
            store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r3"}])
            wait_until(browser, lambda d: "r3" in rows(d), "the new run")
            assert css(browser, "#cmp-a").get_attribute("value") == "feature"
            assert css(browser, "#cmp-b").get_attribute("value") == "r0"


def test_a_live_run_page_keeps_the_recorded_delta_the_reader_opened_as_events_arrive(
    browser: Any, tmp_path: Path
) -> None:
    with agui_store.open(tmp_path / "live.db") as store:
        store.append(open_run("t", "r", "first ", "words"))
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread="t", run="r")
            css(browser, "#event-rows details summary").click()
            store.append([{"type": "TEXT_MESSAGE_END", "messageId": "r-a"},
                          {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}],
                         thread_id="t", run_id="r")
            wait_until(browser, lambda d: css(d, "#run h1 .status").text == "finished",
                       "the run finished on its page")
            assert shown_event_types(browser)[-1] == "RUN_FINISHED"
            assert css(browser, "#event-rows details").get_attribute("open") is not None


def test_a_finished_run_page_says_its_run_was_erased_when_the_reader_comes_back_to_it(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    store, thread = demo
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/run", thread=thread, run="run-1")
        store.delete_thread(thread)
        # The reader comes back to the tab. Headless Chromium keeps every tab visible, so
        # the test sends the event a browser sends then.
        browser.execute_script("document.dispatchEvent(new Event('visibilitychange'))")
        wait_until(browser, lambda d: css_all(d, "#gone"), "the page noticed the erasure")
        assert "no longer in the store" in css(browser, "#gone").text
        assert css(browser, "#run h1 .status").text == "erased"
        script_errors(browser)  # the one poll that found the run gone


def test_the_fork_pages_snippets_give_back_the_typed_agent_url_whatever_it_holds(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    """The URL is pasted inside a Python string and a shell command: a quote, a ``$``, a
    backquote or a backslash in it must reach the agent as typed, not end the string or run
    a command."""
    store, thread = demo

    def pasted() -> tuple[str, str]:
        """The URL as the Python snippet's string and the shell's word read it back."""
        python = css(browser, "#python-call").text
        literal = python.split("httpx.post(", 1)[1].split(", json=body", 1)[0]
        curl = css(browser, "#http-call").text.splitlines()[1]
        word = curl.removeprefix("curl -N -X POST ").removesuffix(" \\")
        words = subprocess.run(
            ["bash", "-c", 'printf "%s\\0" ' + word], capture_output=True, text=True,
            check=True,
        ).stdout.split("\0")[:-1]
        assert len(words) == 1, curl
        return ast.literal_eval(literal), words[0]

    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/fork", thread=thread, run="run-1")
        assert pasted() == ("http://127.0.0.1:8000/agent",) * 2
        field = css(browser, "#agent-url")
        field.clear()
        typed = "http://h/a\"b'c$HOME`id`\\d?x=1&y=$(id)"
        field.send_keys(typed)
        assert pasted() == (typed, typed)
        # Pasted text may hold what no key types: set it as a paste would.
        for value in ["http://h/\x01\x1b[31m\u202eevil\u2028é", "", "plain"]:
            browser.execute_script(
                "const f = document.getElementById('agent-url'); f.value = arguments[0];"
                "f.dispatchEvent(new Event('input'));", value)
            assert pasted() == (value, value), repr(value)


def test_a_control_character_typed_in_the_search_box_comes_back_in_it_as_typed(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    """Pasted text may hold characters no key types (a C1 control, an escape, a bidi
    override): the box the results page shows holds the query as it was sent, to edit."""
    store, _ = demo
    with serving(agui_store.ui.app(store)) as base:
        script_errors(browser)  # what earlier tests left in the log
        for typed in ["Porto\x85", "Porto\x1f", "\x01Porto", "Porto \x1b", "Porto\u202e",
                      "Porto\x7f"]:
            visit(browser, base, "/")
            browser.execute_script(
                "const box = document.querySelector('input[name=q]'); box.value = arguments[0];"
                "box.form.submit();", typed)
            wait_until(browser, lambda d: "q=" in d.current_url and page_ready(d), "the results")
            assert css(browser, "input[name=q]").get_attribute("value") == typed
            assert css_all(browser, "li.hit"), repr(typed)  # Porto is still found
            assert script_errors(browser) == []


def test_a_search_hit_names_its_tool_as_the_agent_spelled_it(
    browser: Any, tmp_path: Path
) -> None:
    """The role is shown in capitals; a tool's name is an identifier, shown as written."""
    from tests.streams import run, tool_result

    with agui_store.open(tmp_path / "tools.db") as store:
        store.append(run("t", "r1", *tool_result("c1", "res1", "refunded", name="refundOrder",
                                                  arguments='{"order": "A1"}')))
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/", q="refundOrder")
            hits = [hit.text for hit in css_all(browser, "li.hit")]
    assert hits and any("refundOrder" in hit for hit in hits), hits
    assert not any("REFUNDORDER" in hit for hit in hits), hits


def test_an_empty_state_object_or_list_shows_as_json_writes_it_with_nothing_to_open(
    browser: Any, tmp_path: Path
) -> None:
    with agui_store.open(tmp_path / "empty.db") as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r0"},
                      {"type": "RUN_FINISHED", "threadId": "t", "runId": "r0"}])
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
                      {"type": "STATE_SNAPSHOT", "snapshot": {"cart": {}, "items": []}},
                      {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"}], parent="r0")
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread="t", run="r0")
            assert css(browser, "#state > .json-tree").text == "{}"
            assert css_all(browser, "#state details") == []
            visit(browser, base, "/run", thread="t", run="r1")
            shown = [leaf.text for leaf in css_all(browser, "#state .jt-leaf")]
    assert shown == ["cart: {}", "items: []"]


def test_a_tool_result_is_shown_in_the_monospace_box_its_calls_arguments_are(
    browser: Any, tmp_path: Path
) -> None:
    arguments = '{"city": "Oslo", "days": 2}'
    with agui_store.open(tmp_path / "tools.db") as store:
        store.append([
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "forecast",
             "parentMessageId": "a"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": arguments},
            {"type": "TOOL_CALL_END", "toolCallId": "c"},
            {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c",
             "content": '{"high": 1.10, "sky": ["rain", "sun"]}'},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ])
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread="t", run="r")
            box, args, result = browser.execute_script(
                "const look = (s) => { const c = getComputedStyle(document.querySelector(s));"
                " return [c.fontFamily, c.fontSize, c.backgroundColor, c.paddingLeft]; };"
                "return [look('.call'), look('.call .args'),"
                " look('.role-tool .msg-text')];"
            )
    assert result[:2] == args[:2]  # the arguments' monospace font and size
    assert result[2:] == box[2:]  # in a box like theirs


def test_right_to_left_ids_keep_the_crumbs_in_order_and_a_hebrew_message_ends_at_its_left(
    browser: Any, tmp_path: Path
) -> None:
    """A Hebrew thread and run id side by side in the crumbs ("threads / THREAD / RUN") would
    run together into one right-to-left stretch, the run drawn before the thread; a Hebrew
    message in a left-to-right block would put its question mark at the right, after the
    words a Hebrew reader reads first."""
    thread, question = "שיחה ראשונה", "ובחיפה?"
    with agui_store.open(tmp_path / "rtl.db") as store:
        for run_id, said in [("ריצה-1", "שלום"), ("ריצה-2", question)]:
            store.append([
                {"type": "RUN_STARTED", "threadId": thread, "runId": run_id},
                {"type": "TEXT_MESSAGE_START", "messageId": f"{run_id}-q", "role": "user"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run_id}-q", "delta": said},
                {"type": "TEXT_MESSAGE_END", "messageId": f"{run_id}-q"},
                {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id},
            ])
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread=thread, run="ריצה-2")
            crumbs = browser.execute_script(
                "return [...document.querySelectorAll('.crumbs > *')].map("
                "(c) => [c.textContent, c.getBoundingClientRect().left]);"
            )
            # The last message's first and last characters, where the page draws them.
            first, last = browser.execute_script(
                "const text = [...document.querySelectorAll('#conversation .msg-text')]"
                ".pop().firstChild;"
                "const at = (i) => { const r = document.createRange();"
                " r.setStart(text, i); r.setEnd(text, i + 1);"
                " return r.getBoundingClientRect().left; };"
                "return [at(0), at(text.length - 1)];"
            )
    assert [name for name, _ in crumbs] == ["threads", thread, "ריצה-2"]
    lefts = [left for _, left in crumbs]
    assert lefts == sorted(lefts)  # each crumb drawn to the right of the one before it
    assert last < first  # the question mark at the left end, where Hebrew ends a line


def test_opening_the_input_of_a_run_erased_since_its_page_loaded_says_the_run_is_gone(
    browser: Any, tmp_path: Path
) -> None:
    """The input is read when the reader opens it: the store's answer that the run is gone
    must not be drawn as if it were the RunAgentInput recorded (a tree with an "error" key)."""
    body = {"threadId": "t", "runId": "r", "state": {}, "messages": [], "tools": [],
            "context": [], "forwardedProps": {}}
    with agui_store.open(tmp_path / "input.db") as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                      {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}], input=body)
        with serving(agui_store.ui.app(store)) as base:
            visit(browser, base, "/run", thread="t", run="r")
            store.delete_thread("t")
            script_errors(browser)
            css(browser, "details.input summary").click()
            shown = wait_until(
                browser, lambda d: css(d, "details.input .json-tree").text, "the input's answer"
            )
            errors = script_errors(browser)
    assert "error:" not in shown
    assert "could not load the input" in shown
    assert css(browser, "#gone").text.startswith("This run is no longer in the store")
    assert [e for e in errors if "/run/input" not in e] == []  # the 404 itself is logged


def test_a_link_in_the_top_bar_focused_from_the_keyboard_has_a_thick_ring_unlike_the_bar(
    browser: Any, demo: tuple[agui_store.Store, str]
) -> None:
    from selenium.webdriver.common.keys import Keys

    store, thread = demo
    read_ring = """
        const link = document.activeElement, style = getComputedStyle(link);
        return [link.matches(':focus-visible') ? link.className || link.textContent : null,
                style.outlineStyle, parseFloat(style.outlineWidth), style.outlineColor,
                getComputedStyle(document.querySelector('header.top')).backgroundColor];
    """
    with serving(agui_store.ui.app(store)) as base:
        visit(browser, base, "/run", thread=thread, run="run-2")
        css(browser, "body").send_keys(Keys.TAB)
        wait_until(browser, lambda d: d.execute_script(
            "return document.activeElement.matches('header.top a')"), "the top bar took focus")
        # Every link of the bar, the brand first and then the crumbs, as Tab reaches them.
        for _ in css_all(browser, "header.top a"):
            focused, style, width, colour, bar = browser.execute_script(read_ring)
            assert focused is not None, "the keyboard's focus is not :focus-visible"
            assert style not in ("none", "hidden"), focused
            assert width >= 2, (focused, width)
            assert colour != bar, (focused, colour)
            browser.switch_to.active_element.send_keys(Keys.TAB)
