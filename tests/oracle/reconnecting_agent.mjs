import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";
import { EMPTY, catchError, throwError } from "rxjs";

// An HttpAgent that gets its thread back after a reload: `await agent.connectAgent()`.
// It posts the RunAgentInput to `<url>/connect`, which agui_store.asgi.Recorder answers.
export class ReconnectingAgent extends HttpAgent {
  connect(input) {
    this.abortController = new AbortController(); // abortRun() stops a reconnect too
    const request = () => this.fetch(`${this.url}/connect`, this.requestInit(input));
    return transformHttpEventStream(runHttpRequest(request)).pipe(
      // A thread the store does not have (or not for this user): nothing to restore.
      catchError((error) => (error.status === 404 ? EMPTY : throwError(() => error))),
    );
  }
}
