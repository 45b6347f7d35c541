// TraceTrial's user-questions answerer for the DeepSeek Harness 0.2.x runtime (the `sdk` profile).
//
// Same role and wire as tt-ask-provider.mjs (rc6; read its header): the benchmark acting as the
// embedding client's UI. 0.2.x replaced the seam's single registered provider
// (ctx.userQuestions.registerProvider) by a waterfall of answerers: UserQuestionService.ask()
// runs ctx.waterfall('user-questions/request', request, noAnswerer), and an answerer is a
// listener that returns the answer to claim the request or calls next() to delegate (as the
// runtime's own web UI does: ctx.remote.$on("user-questions/request", function (request, next)
// ...)). This one claims every request: each becomes one `userQuestions/ask` JSON-RPC request on
// the runtime's stdout, answered by the client from stdin, exactly as for rc6. Loaded by the
// --patch overlay the adapter writes beside this file ("./tt-ask-answerer.mjs").
import { randomUUID } from "node:crypto";
import { StringDecoder } from "node:string_decoder";

export const name = "tt-user-questions-answerer";
export const inject = ["userQuestions"];

export function apply(ctx) {
  const pending = new Map();
  const decoder = new StringDecoder("utf8");
  let buffer = "";
  const onData = (chunk) => {
    buffer += typeof chunk === "string" ? chunk : decoder.write(chunk);
    for (;;) {
      const nl = buffer.indexOf("\n");
      if (nl < 0) break;
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (!line) continue;
      let frame;
      try { frame = JSON.parse(line); } catch { continue; }
      if (!frame || typeof frame !== "object" || typeof frame.method === "string") continue;
      const waiter = pending.get(frame.id);
      if (!waiter) continue;
      pending.delete(frame.id);
      if (frame.error) waiter.reject(new Error(frame.error.message ?? "userQuestions/ask failed"));
      else waiter.resolve(frame.result);
    }
  };
  process.stdin.on("data", onData);
  const ask = (request) => {
      const id = `uq_${randomUUID().replaceAll("-", "")}`;
      const params = {
        sessionId: request.agent ? String(request.agent.session.id) : undefined,
        questions: request.questions,
      };
      return new Promise((resolve, reject) => {
        const onAbort = () => { pending.delete(id); reject(new Error("ask_user_question aborted")); };
        request.signal?.addEventListener("abort", onAbort, { once: true });
        pending.set(id, {
          resolve: (result) => {
            request.signal?.removeEventListener("abort", onAbort);
            if (!result || !Array.isArray(result.answers)) reject(new Error("userQuestions/ask: the client sent no answers"));
            else resolve({ answers: result.answers });
          },
          reject: (err) => { request.signal?.removeEventListener("abort", onAbort); reject(err); },
        });
        process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id, method: "userQuestions/ask", params }) + "\n");
      });
  };
  // A root-context listener: the waterfall reaches it for every agent's question (the benchmark
  // is the only UI), so it claims the request instead of calling next().
  ctx.on("user-questions/request", function (request, _next) { return ask(request); });
  ctx.effect(() => () => {
    process.stdin.off("data", onData);
    for (const w of pending.values()) w.reject(new Error("answerer disposed"));
    pending.clear();
  }, "tt-user-questions-answerer.stdin");
}
