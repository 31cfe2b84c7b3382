// agui-store viewer: the little the pages need beyond HTML. No framework, no build step.
"use strict";

const POLL_MS = 1500;

// Characters shown as their escape, as the server's pages show them: C0 controls but tab,
// newline and carriage return, DEL, C1, and the bidirectional overrides and isolates, which
// would reorder the page around a stored string.
const HIDDEN = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g;

function shown(text) {
  return String(text).replace(HIDDEN, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? "\\x" + code.toString(16).padStart(2, "0")
      : "\\u" + code.toString(16).padStart(4, "0");
  });
}

// What breaks a line or hides in it: each snippet's quoting writes it as an escape.
const LINE_CONTROL = /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const hex = (code, width) => code.toString(16).padStart(width, "0");

// The agent URL the reader types, as each snippet's language reads it back whatever it holds
// (a quote, a $, a backslash): a Python string literal (JSON's, which Python reads alike,
// with every hidden character as \uXXXX) and a shell word quoted as the server quotes the
// command's words (records.shell_command: bare when safe, else in single quotes, or in
// ANSI-C quotes when it holds a control character).
const QUOTED = {
  python: (value) => JSON.stringify(value).replace(new RegExp(LINE_CONTROL, "g"),
    (c) => "\\u" + hex(c.charCodeAt(0), 4)),
  shell: (value) => {
    if (value === "") return "''";
    if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
    if (!LINE_CONTROL.test(value)) return "'" + value.replaceAll("'", "'\"'\"'") + "'";
    const escapes = { "\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "'": "\\'" };
    return "$'" + value.replace(new RegExp("[\\\\']|" + LINE_CONTROL.source, "g"), (c) => {
      const code = c.charCodeAt(0);
      return escapes[c] || (code < 0x80 ? "\\x" + hex(code, 2) : "\\u" + hex(code, 4));
    }) + "'";
  },
};

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = shown(text);
  return node;
}

// A page whose thread or run the store no longer holds (erased since it was loaded): say so
// above its content, and stop asking for updates.
function markGone(what) {
  if (document.getElementById("gone")) return;
  const note = el("p", "warning gone", `This ${what} is no longer in the store (erased since the page was loaded). `);
  note.id = "gone";
  const home = el("a", null, "Back to the threads");
  home.href = document.querySelector("header a")?.getAttribute("href") || "/";
  note.append(home);
  const heading = document.querySelector("main h1");
  if (heading) heading.after(note); else document.body.prepend(note);
  for (const live of document.querySelectorAll("#live")) live.hidden = true;
  for (const badge of document.querySelectorAll("main h1 .status")) {
    badge.className = "status";
    badge.textContent = "erased";
  }
}

async function getText(url) {
  const response = await fetch(url, { headers: { Accept: "text/html" } });
  if (!response.ok) throw new Error(`${response.status} ${url}`);
  return response.text();
}

// --- JSON trees: children are built when opened, so a deep or wide state costs nothing
// until it is looked at. ---------------------------------------------------------------
// A number as the JSON wrote it: a double would round an id past 2**53 (and show 2.0 as 2).
class JsonNumber {
  constructor(source) { this.source = source; }
}

// The JSON `text`, its numbers kept as written (where the browser gives a reviver the
// source text; elsewhere they are doubles, as JSON.parse makes them).
function parseJson(text) {
  return JSON.parse(text, (key, value, context) =>
    typeof value === "number" && context?.source !== undefined ? new JsonNumber(context.source) : value);
}

function jsonNode(key, value, depth) {
  const isObject = value !== null && typeof value === "object" && !(value instanceof JsonNumber);
  if (!isObject) {
    const row = el("div", "jt-leaf");
    if (key !== null) row.append(el("span", "jt-key", key + ": "));
    if (value instanceof JsonNumber) {
      row.append(el("span", "jt-number", value.source));
      return row;
    }
    const kind = value === null ? "null" : typeof value;
    row.append(el("span", "jt-" + kind, JSON.stringify(value)));
    return row;
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  if (entries.length === 0) {
    // Nothing to open: written as JSON writes it ("{0}" read as an object holding a 0).
    const row = el("div", "jt-leaf");
    if (key !== null) row.append(el("span", "jt-key", key + ": "));
    row.append(el("span", "jt-shape", Array.isArray(value) ? "[]" : "{}"));
    return row;
  }
  const box = el("details", "jt-node");
  const summary = el("summary");
  if (key !== null) summary.append(el("span", "jt-key", key + ": "));
  summary.append(el("span", "jt-shape",
    Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`));
  box.append(summary);
  let built = false;
  const build = () => {
    if (built) return;
    built = true;
    const children = el("div", "jt-children");
    for (const [k, v] of entries.slice(0, 1000)) children.append(jsonNode(k, v, depth + 1));
    if (entries.length > 1000) children.append(el("div", "clipped", `… ${entries.length - 1000} more`));
    box.append(children);
  };
  box.addEventListener("toggle", build);
  if (depth < 2 && entries.length <= 50) { box.open = true; build(); }
  return box;
}

function renderJsonTree(container, value) {
  container.replaceChildren(jsonNode(null, value, 0));
}

function initJsonTrees(root) {
  for (const tree of root.querySelectorAll(".json-tree[data-source]")) {
    const source = document.getElementById(tree.dataset.source);
    if (source) renderJsonTree(tree, parseJson(source.textContent));
  }
}

// --- live updates ------------------------------------------------------------------------
async function getPage(url) {
  return new DOMParser().parseFromString(await getText(url), "text/html");
}

// Makes `into` show what `from` (the same element of a newer copy of the page) shows. The
// children that carry an id are kept and updated in place, and the others replaced: the
// message a link points at stays the page's :target, and the browser keeps the reader's
// place in a conversation that grows.
function patchElement(into, from) {
  if (into.isEqualNode(from)) return;
  for (const { name } of [...into.attributes]) {
    if (!from.hasAttribute(name)) into.removeAttribute(name);
  }
  for (const { name, value } of from.attributes) {
    if (into.getAttribute(name) !== value) into.setAttribute(name, value);
  }
  const byId = new Map([...into.children].filter((c) => c.id).map((c) => [c.id, c]));
  const fresh = [...from.childNodes].map((node) => {
    const old = node.id ? byId.get(node.id) : undefined;
    return old && old.tagName === node.tagName ? [node, old] : [node, null];
  });
  const kept = new Set(fresh.map(([, old]) => old).filter(Boolean));
  for (const child of [...into.childNodes]) if (!kept.has(child)) child.remove();
  let next = into.firstChild;
  for (const [node, old] of fresh) {
    if (!old) { into.insertBefore(node, next); continue; }
    patchElement(old, node);
    if (old === next) next = old.nextSibling; else into.insertBefore(old, next);
  }
}

// --- run page --------------------------------------------------------------------------
function initRunPage() {
  const run = document.getElementById("run");
  if (!run) return;
  const changes = document.getElementById("changes");
  let changesShown = null;
  // Redrawn only when it changed, so that what the reader opened in it stays open.
  const loadChanges = async () => {
    const html = await getText(changes.dataset.href);
    if (html === changesShown) return;
    changesShown = html;
    changes.innerHTML = html;
    initJsonTrees(changes);
  };
  loadChanges().catch((e) => { changes.textContent = "could not load: " + e.message; });
  for (const details of document.querySelectorAll("details.input[data-href]")) {
    details.addEventListener("toggle", async () => {
      if (!details.open || details.dataset.loaded) return;
      details.dataset.loaded = "1";
      const tree = details.querySelector(".json-tree");
      // The store's answer that the run is gone (or any other failure) is said as such,
      // never drawn as if it were the input recorded.
      try {
        const response = await fetch(details.dataset.href);
        if (response.status === 404) markGone("run");
        if (!response.ok) throw new Error(`${response.status} ${details.dataset.href}`);
        renderJsonTree(tree, parseJson(await response.text()));
      } catch (e) {
        tree.replaceChildren(el("p", "warning", "could not load the input: " + e.message));
      }
    });
  }
  const filter = document.getElementById("event-filter");
  // A row is hidden when its type's box is unticked: a type first recorded after the page
  // loaded shows until the reader unticks it.
  const applyFilter = (rows) => {
    const hidden = new Set([...filter.querySelectorAll("input:not(:checked)")].map((i) => i.value));
    for (const row of rows.querySelectorAll("tr.event")) row.hidden = hidden.has(row.dataset.type);
  };
  filter.addEventListener("change", () => applyFilter(document.getElementById("event-rows")));

  // The state's source: its JSON, or the note that it is too large to show.
  const stateOf = (box) => box.querySelector("script, p")?.textContent;
  // Everything the page says about the run, from a newer copy of it (the same view: every
  // message or event if the reader asked for them). What the reader chose stays: the event
  // types they hid, an unchanged state's open nodes, the message the URL points at.
  const update = async () => {
    const [fresh] = await Promise.all([getPage(run.dataset.page), loadChanges()]);
    const part = (selector) => [document.querySelector(selector), fresh.querySelector(selector)];
    for (const selector of ["#run > h1", "#run > .facts-grid"]) {
      const [shown, now] = part(selector);
      shown.replaceChildren(...now.childNodes);
    }
    patchElement(...part("section.conversation"));
    const [state, newState] = part("#state");
    if (stateOf(state) !== stateOf(newState)) {
      state.replaceChildren(...newState.childNodes);
      initJsonTrees(state);
    }
    // A type first recorded since the last update gets its box, ticked, in its sorted place;
    // the boxes the reader already has stay as they left them.
    const typeOf = (label) => label.querySelector("input").value;
    const boxes = new Map([...filter.querySelectorAll("label")].map((l) => [typeOf(l), l]));
    filter.replaceChildren(...[...fresh.querySelectorAll("#event-filter label")].map(
      (label) => boxes.get(typeOf(label)) || label));
    // The rows the reader opened ("first delta as recorded") stay open in the new rows.
    const [rows, newRows] = part("#event-rows");
    const opened = new Set([...rows.querySelectorAll("tr.event details[open]")].map(
      (details) => details.closest("tr").dataset.index));
    for (const row of newRows.querySelectorAll("tr.event")) {
      const details = row.querySelector("details");
      if (details && opened.has(row.dataset.index)) details.open = true;
    }
    applyFilter(newRows);
    rows.replaceChildren(...newRows.childNodes);
    const facts = fresh.getElementById("run").dataset;
    run.dataset.status = facts.status;
    return facts.token;
  };
  if (run.dataset.status === "incomplete") {
    let token = run.dataset.token;
    const poll = async () => {
      try {
        const response = await fetch(run.dataset.poll);
        if (response.status === 404) return markGone("run");
        const now = await response.json();
        if (now.token !== token) token = await update();
        if (run.dataset.status !== "incomplete") return;
      } catch (e) { /* the server went away, or the run was erased as it was read: try again */ }
      setTimeout(poll, POLL_MS);
    };
    setTimeout(poll, POLL_MS);
  } else {
    // A finished run does not change, so its page asks nothing while it is open; a reader
    // coming back to it learns whether it was erased meanwhile.
    document.addEventListener("visibilitychange", async () => {
      if (document.visibilityState !== "visible") return;
      try {
        if ((await fetch(run.dataset.poll)).status === 404) markGone("run");
      } catch (e) { /* the server went away: the page stays as it was */ }
    });
  }
}

// --- run tree --------------------------------------------------------------------------
function initTreePage() {
  const tree = document.getElementById("tree");
  if (!tree) return;
  const rows = document.getElementById("tree-rows");
  const picked = [];
  // The rows show the runs ticked; the compare form takes them when a tick changes, and
  // keeps what the reader typed in it while rows are loaded or updated.
  const syncPicks = () => {
    for (const box of rows.querySelectorAll("input.pick-run")) {
      box.checked = picked.includes(box.value);
      box.closest("tr").classList.toggle("picked", box.checked);
    }
  };
  rows.addEventListener("change", (event) => {
    const box = event.target;
    if (!box.classList || !box.classList.contains("pick-run")) return;
    const at = picked.indexOf(box.value);
    if (box.checked && at < 0) picked.push(box.value);
    if (!box.checked && at >= 0) picked.splice(at, 1);
    while (picked.length > 2) picked.shift();
    syncPicks();
    const [a, b] = picked;
    document.getElementById("cmp-a").value = a || "";
    document.getElementById("cmp-b").value = b || "";
  });
  // Puts the page of runs an "Older runs" button loads in place of its row (unless a live
  // update replaced the rows meanwhile: it brings them too).
  const loadOlder = async (button) => {
    const html = await getText(button.dataset.href);
    const holder = button.closest("tr");
    if (!holder.parentNode) return;
    holder.insertAdjacentHTML("afterend", html);
    holder.remove();
  };
  let screens = 1; // the first screen of runs, and each older page the reader asked for
  rows.addEventListener("click", async (event) => {
    const button = event.target.closest("button.more");
    if (!button) return;
    button.disabled = true;
    screens += 1;
    await loadOlder(button);
    syncPicks();
  });
  let token = tree.dataset.token;
  const live = document.getElementById("live");
  // The rows again, as many screens of them as the reader loaded: the older runs stay (a new
  // run moves each screen's last run onto the next), and so do the runs they ticked. The
  // branches named above the tree and offered in the compare form are those of now too (one
  // deleted, renamed or made since the page loaded).
  const update = async () => {
    const wanted = screens;
    const fresh = await getPage(tree.dataset.page);
    const body = fresh.getElementById("tree-rows");
    for (let shown = 1; shown < wanted; shown++) {
      const more = body.querySelector("button.more");
      if (!more) break;
      await loadOlder(more);
    }
    if (screens !== wanted) return false; // the reader loaded more meanwhile: read again
    rows.replaceChildren(...body.childNodes);
    for (const id of ["branches", "refs"]) {
      document.getElementById(id).replaceChildren(...fresh.getElementById(id).childNodes);
    }
    syncPicks();
    return true;
  };
  const poll = async () => {
    try {
      const response = await fetch(tree.dataset.poll);
      if (response.status === 404) return markGone("thread");
      const now = await response.json();
      if (now.token !== token && await update()) {
        token = now.token;
        live.hidden = false;
      }
    } catch (e) { /* the server went away: try again */ }
    setTimeout(poll, POLL_MS);
  };
  setTimeout(poll, POLL_MS);
}

// --- writes (with --allow-writes), copy buttons, fork snippets ------------------------
function initForms() {
  for (const form of document.querySelectorAll("form.branch-form")) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const result = form.querySelector(".branch-result");
      const body = { thread: form.dataset.thread, run: form.dataset.run, name: form.elements.name.value };
      let response, answer;
      try {
        response = await fetch(form.dataset.action, {
          method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
        });
        answer = await response.json();
      } catch (e) {
        // No answer (the viewer stopped), or one that is not the viewer's (a proxy's page).
        result.textContent = "no branch made: the viewer did not answer "
          + (response ? `(${response.status} ${response.statusText})` : "(is agui-store ui still running?)");
        result.className = "branch-result failed";
        return;
      }
      result.textContent = response.ok ? `branch ${answer.name} → ${answer.runId}` : answer.error;
      result.className = "branch-result " + (response.ok ? "ok" : "failed");
    });
  }
  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", async () => {
      const source = document.getElementById(button.dataset.copy);
      try {
        await navigator.clipboard.writeText(source.textContent);
        button.textContent = "Copied";
      } catch (e) {
        getSelection().selectAllChildren(source);
        button.textContent = "Selected: press Ctrl+C";
      }
    });
  }
  // The diff form's dots follow its mode, as the page's heading writes them.
  for (const form of document.querySelectorAll("form.compare")) {
    const mode = form.querySelector("select[name=mode]");
    const dots = form.querySelector(".dots");
    if (mode && dots) {
      mode.addEventListener("change", () => {
        dots.textContent = mode.value === "three-dot" ? "..." : "..";
      });
    }
  }
  const url = document.getElementById("agent-url");
  if (url) {
    url.addEventListener("input", () => {
      for (const snippet of document.querySelectorAll("pre.snippet[data-quote]")) {
        const { before, after, quote } = snippet.dataset;
        snippet.textContent = before + QUOTED[quote](url.value) + after;
      }
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  initJsonTrees(document);
  initRunPage();
  initTreePage();
  initForms();
  document.body.dataset.ready = "1";
});
