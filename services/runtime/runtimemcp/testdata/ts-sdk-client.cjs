// The official MCP TypeScript SDK against the front door (run by
// e2e_test.go TestEndToEndTypeScriptSDK with the SDK of .tools/npm):
// streamable HTTP session, tool_search and list_changed; the 2024-11-05
// HTTP+SSE transport fails at once (405); a session-based POST without a
// session id is 400. Prints one JSON object.
const { createRequire } = require("node:module");
const sdk = createRequire(process.env.SDK_PACKAGE_JSON);
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = sdk("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { SSEClientTransport } = sdk("@modelcontextprotocol/sdk/client/sse.js");
const { ToolListChangedNotificationSchema } = sdk("@modelcontextprotocol/sdk/types.js");

const url = new URL(process.env.MCP_URL);
const headers = { Authorization: "Bearer " + process.env.MCP_TOKEN };
const out = {};

async function main() {
  const client = new Client({ name: "toolplane-ts-e2e", version: "0" });
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
  const tr = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
  await client.connect(tr);
  out.protocol = tr.protocolVersion;
  out.sessionId = Boolean(tr.sessionId);
  out.before = (await client.listTools()).tools.map((t) => t.name);
  const res = await client.callTool({ name: "tool_search", arguments: { query: "select:everything_get-sum" } });
  out.searchError = Boolean(res.isError);
  for (let i = 0; i < 250 && changed === 0; i++) await new Promise((r) => setTimeout(r, 20));
  out.listChanged = changed;
  out.after = (await client.listTools()).tools.map((t) => t.name);
  const sum = await client.callTool({ name: "everything_get-sum", arguments: { a: 2, b: 3 } });
  out.sum = sum.content.map((c) => c.text || "").join(" ");
  await client.close();

  // A POST without Mcp-Session-Id on a session-based version.
  const r = await fetch(url, {
    method: "POST",
    headers: { ...headers, "Content-Type": "application/json", Accept: "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
  });
  out.postWithoutSession = r.status;

  // The deprecated HTTP+SSE transport: GET without a session id.
  const legacy = new Client({ name: "toolplane-ts-sse", version: "0" });
  const start = Date.now();
  try {
    await legacy.connect(new SSEClientTransport(url, { requestInit: { headers }, eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init && init.headers), ...headers } }) } }));
    out.sse = "connected";
  } catch (e) {
    out.sse = String(e && e.message || e);
  }
  out.sseMillis = Date.now() - start;
}

main().then(
  () => { console.log(JSON.stringify(out)); process.exit(0); },
  (e) => { out.error = String(e && e.stack || e); console.log(JSON.stringify(out)); process.exit(1); },
);
