#!/usr/bin/env node
// The official @ag-ui/client 1.0.0 as a long-lived test oracle.
//
// One JSON request per stdin line, one JSON answer per stdout line, in order, so that a
// pytest session pays node's start-up once instead of once per hypothesis example.
//
//   {"op": "replay", "events": [...], "messages": [...], "state": ..., "mode": "reducer"|"raw"|"pipeline"}
//       -> {"ok": true, "messages": [...], "state": ..., "pendingInterrupts": [...], "warnings": [...]}
//   {"op": "compact", "events": [...]}        -> {"ok": true, "events": [...], "warnings": [...]}
//   {"op": "verify", "events": [...], "schema": bool, "chunks": bool}
//       -> {"ok": true, "count": n} | {"ok": false, "index": i, "error": "..."}
//   {"op": "string", "values": [...], "undefined": "<marker>"}
//       -> {"ok": true, "strings": ["...", {"error": "..."}, ...]}   (JavaScript's String(value))
//
// A failure of the client itself answers {"ok": false, "error": "..."} (with "index" for verify).
import {
  AbstractAgent,
  compactEvents,
  defaultApplyEvents,
  enforceEvents,
  transformChunks,
  verifyEvents,
} from "@ag-ui/client";
import { createInterface } from "node:readline";
import { from, lastValueFrom } from "rxjs";
import { tap, toArray } from "rxjs/operators";

class ReplayAgent extends AbstractAgent {
  constructor(events, config) {
    super(config);
    this.recorded = events;
  }
  run() {
    return from(this.recorded);
  }
}

const errorText = (e) => (e instanceof Error ? e.message : String(e));

async function replay(req, warnings) {
  const events = req.events ?? [];
  const messages0 = req.messages ?? [];
  const state0 = req.state === undefined ? {} : req.state;
  if (req.mode === "pipeline") {
    const agent = new ReplayAgent(events, {
      threadId: req.threadId ?? "replay",
      initialMessages: messages0,
      initialState: state0,
    });
    try {
      await agent.runAgent();
    } catch (e) {
      return { ok: false, error: errorText(e) };
    }
    return {
      ok: true,
      messages: agent.messages,
      state: agent.state,
      pendingInterrupts: agent.pendingInterrupts ?? [],
      warnings,
    };
  }
  // The reducer alone, as AbstractAgent drives it: it reads agent.messages once and
  // writes agent.pendingInterrupts on RUN_FINISHED.
  const agent = { messages: messages0, state: state0, pendingInterrupts: [] };
  const input = {
    threadId: "replay",
    runId: "replay",
    state: state0,
    messages: messages0,
    tools: [],
    context: [],
    forwardedProps: {},
  };
  let source$ = from(events);
  if (req.mode !== "raw") source$ = source$.pipe(transformChunks());
  let messages = messages0;
  let state = state0;
  try {
    const mutations = await lastValueFrom(
      defaultApplyEvents(input, source$, agent, []).pipe(toArray()),
    );
    for (const m of mutations) {
      if (m.messages !== undefined) messages = m.messages;
      if (m.state !== undefined) state = m.state;
    }
  } catch (e) {
    return { ok: false, error: errorText(e) };
  }
  return { ok: true, messages, state, pendingInterrupts: agent.pendingInterrupts, warnings };
}

async function verify(req) {
  let index = -1;
  let source$ = from(req.events ?? []).pipe(tap(() => index++));
  if (req.schema) source$ = source$.pipe(enforceEvents());
  if (req.chunks) source$ = source$.pipe(transformChunks());
  try {
    const out = await lastValueFrom(source$.pipe(verifyEvents(), toArray()), { defaultValue: [] });
    return { ok: true, count: out.length };
  } catch (e) {
    return { ok: false, index, error: errorText(e) };
  }
}

async function answer(line) {
  const warnings = [];
  const saved = { warn: console.warn, error: console.error, log: console.log };
  console.warn = (...a) => warnings.push(a.map(String).join(" "));
  console.error = console.warn;
  console.log = console.warn;
  try {
    const req = JSON.parse(line);
    if (req.op === "replay") return await replay(req, warnings);
    if (req.op === "verify") return await verify(req);
    if (req.op === "compact") {
      try {
        return { ok: true, events: compactEvents(req.events ?? []), warnings };
      } catch (e) {
        return { ok: false, error: errorText(e) };
      }
    }
    if (req.op === "string") {
      // JSON has no undefined: the marker string stands for it, at the top or in arrays.
      const revive = (v) =>
        v === req.undefined ? undefined : Array.isArray(v) ? v.map(revive) : v;
      const strings = req.values.map((v) => {
        try {
          return String(revive(v));
        } catch (e) {
          return { error: errorText(e) };
        }
      });
      return { ok: true, strings };
    }
    return { ok: false, error: `unknown op ${req.op}` };
  } catch (e) {
    return { ok: false, error: `harness: ${errorText(e)}` };
  } finally {
    Object.assign(console, saved);
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const reply = await answer(line);
  let text;
  try {
    text = JSON.stringify(reply);
  } catch (e) {
    // What the client holds cannot be written out (a state that contains itself): say so
    // instead of dying, so the test can tell it from an error the client threw.
    text = JSON.stringify({ ok: false, unwritable: errorText(e) });
  }
  process.stdout.write(text + "\n");
}
