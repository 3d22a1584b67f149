// Fixture ACP agent for services/catalog/catalogacp tests, written with the
// official TypeScript SDK (@agentclientprotocol/sdk, pinned in package.json).
// Prompts select behaviour by their first word:
//   echo <text>   streams a thought, two message chunks and a tool call,
//                 writes answer.txt into its working directory, ends end_turn
//   permission    asks for permission and reports the option it was given
//   wait          streams one chunk, then waits until session/cancel and
//                 answers stopReason "cancelled"
//   hang          streams one chunk and ignores session/cancel
//   crash         exits with status 3 in the middle of the prompt
//   env           answers with $FIXTURE_TOKEN and its working directory
import { agent, methods, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const sessions = new Map(); // sessionId -> {cwd, cancel}
let next = 0;

const text = (t) => ({ type: "text", text: t });

agent({ name: "toolplane-fixture-agent" })
  .onRequest(methods.agent.initialize, async () => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: "toolplane-fixture-agent", version: "1.0.0" },
    authMethods: [],
  }))
  .onRequest(methods.agent.session.new, async ({ params }) => {
    const sessionId = `s${++next}`;
    sessions.set(sessionId, { cwd: params.cwd, model: params._meta?.model ?? "", cancel: null });
    return { sessionId };
  })
  .onNotification(methods.agent.session.cancel, async ({ params }) => {
    const s = sessions.get(params.sessionId);
    if (s?.cancel) s.cancel();
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const s = sessions.get(params.sessionId);
    const prompt = params.prompt.filter((b) => b.type === "text").map((b) => b.text).join("");
    const [verb, ...rest] = prompt.split(" ");
    const update = (u) => client.notify(methods.client.session.update, { sessionId: params.sessionId, update: u });
    switch (verb) {
      case "echo": {
        await update({ sessionUpdate: "agent_thought_chunk", content: text("thinking") });
        await update({ sessionUpdate: "tool_call", toolCallId: "t1", title: "write answer.txt", kind: "edit", status: "in_progress" });
        writeFileSync(join(s.cwd, "answer.txt"), rest.join(" "));
        await update({ sessionUpdate: "tool_call_update", toolCallId: "t1", status: "completed" });
        await update({ sessionUpdate: "agent_message_chunk", content: text("you said: ") });
        await update({ sessionUpdate: "agent_message_chunk", content: text(rest.join(" ")) });
        return { stopReason: "end_turn" };
      }
      case "permission": {
        await update({ sessionUpdate: "tool_call", toolCallId: "t2", title: "rm -rf /", kind: "execute", status: "pending" });
        const r = await client.request(methods.client.session.requestPermission, {
          sessionId: params.sessionId,
          toolCall: { toolCallId: "t2", title: "rm -rf /", kind: "execute", status: "pending" },
          options: [
            { optionId: "always", name: "Always allow", kind: "allow_always" },
            { optionId: "once", name: "Allow once", kind: "allow_once" },
            { optionId: "no", name: "Reject", kind: "reject_once" },
          ],
        });
        const got = r.outcome.outcome === "selected" ? r.outcome.optionId : r.outcome.outcome;
        await update({ sessionUpdate: "agent_message_chunk", content: text(`permission: ${got}`) });
        return { stopReason: "end_turn" };
      }
      case "wait": {
        await update({ sessionUpdate: "agent_message_chunk", content: text("started") });
        await new Promise((resolve) => { s.cancel = resolve; });
        s.cancel = null;
        return { stopReason: "cancelled" };
      }
      case "hang":
        await update({ sessionUpdate: "agent_message_chunk", content: text("hanging") });
        await new Promise(() => {});
      case "crash":
        await update({ sessionUpdate: "agent_message_chunk", content: text("about to crash") });
        process.exit(3);
      case "env":
        await update({ sessionUpdate: "agent_message_chunk", content: text(`token=${process.env.FIXTURE_TOKEN ?? ""} cwd=${process.cwd()} model=${s.model}`) });
        return { stopReason: "end_turn" };
      default:
        await update({ sessionUpdate: "agent_message_chunk", content: text(`unknown verb ${verb}`) });
        return { stopReason: "end_turn" };
    }
  })
  .connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
