#!/usr/bin/env node
// Drives the real @ag-ui/client 1.0.0 HttpAgent against a live server for the end-to-end
// tests (tests/test_asgi_e2e.py). One JSON command per stdin line, one JSON answer per
// stdout line, in order: one node process serves a whole test module.
//
//   {"url", "threadId", "headers"?, "agents": [AgentPlan, ...]}     agents run concurrently
//   AgentPlan: {"messages"?, "state"?, "steps": [Step, ...]}        steps run in order
//   Step: {"op": "run", "runId"?, "say"?, "abortAfter"?: {"type", "count"}}
//       | {"op": "connect"} | {"op": "sleep", "ms"}
//   -> {"ok": true, "agents": [{"messages", "state", "steps": [{"events", "error"?}]}],
//       "warnings": [...], "uncaught": [...]}
//
// "say" adds a user message before the run, as an app does; "abortAfter" calls abortRun()
// once that many events of that type were applied.
//
// A stream the server drops mid-run fails its run ("terminated", the step's "error"), and
// undici throws the same error once more outside it, which would end node: such errors are
// the answer's "uncaught" instead, and the process goes on with the next command.
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { ReconnectingAgent } from "./reconnecting_agent.mjs";

const errorText = (e) => (e instanceof Error ? e.message : String(e));

const uncaught = [];
process.on("uncaughtException", (e) => uncaught.push(errorText(e)));
process.on("unhandledRejection", (e) => uncaught.push(errorText(e)));

// What is thrown outside a run after it failed comes within the next turns of the event loop.
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

async function runStep(agent, step) {
  const events = [];
  let seen = 0;
  const subscriber = {
    onEvent({ event }) {
      events.push(event.type);
      const stop = step.abortAfter;
      if (stop && event.type === stop.type && ++seen === stop.count) agent.abortRun();
    },
  };
  const out = { events };
  try {
    if (step.op === "sleep") {
      await new Promise((resolve) => setTimeout(resolve, step.ms));
    } else if (step.op === "connect") {
      await agent.connectAgent({}, subscriber);
    } else {
      if (step.say !== undefined) {
        agent.addMessage({ id: randomUUID(), role: "user", content: step.say });
      }
      await agent.runAgent(step.runId ? { runId: step.runId } : {}, subscriber);
    }
  } catch (e) {
    out.error = errorText(e);
  }
  return out;
}

async function drive(command, plan) {
  const agent = new ReconnectingAgent({
    url: command.url,
    threadId: command.threadId,
    headers: command.headers ?? {},
    initialMessages: plan.messages ?? [],
    initialState: plan.state ?? {},
  });
  const steps = [];
  for (const step of plan.steps) steps.push(await runStep(agent, step));
  return { messages: agent.messages, state: agent.state, steps };
}

async function answer(line) {
  const warnings = [];
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...a) => warnings.push(a.map(String).join(" "));
  console.error = console.warn;
  try {
    const command = JSON.parse(line);
    const agents = await Promise.all(command.agents.map((plan) => drive(command, plan)));
    await settle();
    return { ok: true, agents, warnings, uncaught: uncaught.splice(0) };
  } catch (e) {
    await settle();
    return { ok: false, error: errorText(e), warnings, uncaught: uncaught.splice(0) };
  } finally {
    Object.assign(console, saved);
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  process.stdout.write(JSON.stringify(await answer(line)) + "\n");
}
