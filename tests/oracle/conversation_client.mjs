#!/usr/bin/env node
// Drives the real @ag-ui/client 1.0.0 HttpAgent for the pydantic-ai conversation tests
// (tests/test_pydantic_ai_e2e.py): one JSON command per stdin line, one JSON answer per
// stdout line, in order. The test holds the conversation the way an app's UI does and
// sends what the UI would: the messages it shows (cut for a regenerate, changed for an
// edit, with a tool message for a call it answered), the tools it offers.
//
//   {"url", "threadId", "runId", "messages", "tools"?, "headers"?}
//   -> {"ok": true, "messages", "events": [{"type", "name"?, "value"?}], "error"?, "uncaught"}
//
// A stream the server drops mid-run fails its run ("terminated", the answer's "error"), and
// undici throws the same error once more outside it, which would end node: such errors are
// the answer's "uncaught" instead, and the process goes on with the next command.
import { createInterface } from "node:readline";
import { HttpAgent } from "@ag-ui/client";

const errorText = (e) => (e instanceof Error ? e.message : String(e));

const uncaught = [];
process.on("uncaughtException", (e) => uncaught.push(errorText(e)));
process.on("unhandledRejection", (e) => uncaught.push(errorText(e)));

// What is thrown outside a run after it failed comes within the next turns of the event loop.
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

async function answer(line) {
  const command = JSON.parse(line);
  const agent = new HttpAgent({
    url: command.url,
    threadId: command.threadId,
    headers: command.headers ?? {},
    initialMessages: command.messages ?? [],
  });
  const events = [];
  const subscriber = {
    onEvent({ event }) {
      const seen = { type: event.type };
      if (event.type === "CUSTOM") Object.assign(seen, { name: event.name, value: event.value });
      if (event.type === "RUN_ERROR") seen.message = event.message;
      events.push(seen);
    },
  };
  const out = { ok: true, events };
  try {
    await agent.runAgent({ runId: command.runId, tools: command.tools ?? [] }, subscriber);
  } catch (e) {
    out.error = errorText(e);
  }
  out.messages = agent.messages;
  return out;
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let out;
  try {
    out = await answer(line);
  } catch (e) {
    out = { ok: false, error: errorText(e) };
  }
  await settle();
  out.uncaught = uncaught.splice(0);
  process.stdout.write(JSON.stringify(out) + "\n");
}
