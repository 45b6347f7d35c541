// TraceTrial's user-questions provider for the DeepSeek Harness runtime (0.1.0rc6).
//
// The runtime ships the ctx.userQuestions seam (@deepseek-ai/dsh-user-questions) and the
// model-facing ask_user_question tool over it (@deepseek-ai/dsh-tool-ask-user), but no provider:
// the embedding client (a UI) registers the one that shows the questions to a human. This is that
// provider for the benchmark's client (harnesses/deepseek/rpc.py), which answers through the
// simulated user; it is the benchmark acting as the client's UI, not harness behaviour.
//
// Each ctx.userQuestions.ask() becomes one JSON-RPC request on the runtime's stdout, the stdio
// channel the client already reads:
//   {"jsonrpc":"2.0","id":"uq_<hex>","method":"userQuestions/ask",
//    "params":{"sessionId":"<session>","questions":[{id, question, header?, options?, multiSelect?}]}}
// and resolves with the client's response read from stdin:
//   {"jsonrpc":"2.0","id":"uq_<hex>","result":{"answers":[{"id":"<qid>","selected":["<label>"],"custom":"<text>"}]}}
// (an "error" response rejects the ask: the tool call ends in error). The runtime's own stdin
// reader drops responses whose id it did not issue, so the answer is read here from a second
// stdin listener. Loaded by the cordis file the adapter writes beside this file ("./tt-ask-provider.mjs").
import { randomUUID } from "node:crypto";
import { StringDecoder } from "node:string_decoder";

export const name = "tt-user-questions-provider";
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
  const dispose = ctx.userQuestions.registerProvider({
    ask(request) {
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
    },
  });
  ctx.effect(() => () => {
    process.stdin.off("data", onData);
    for (const w of pending.values()) w.reject(new Error("provider disposed"));
    pending.clear();
  }, "tt-user-questions-provider.stdin");
  return dispose;
}
