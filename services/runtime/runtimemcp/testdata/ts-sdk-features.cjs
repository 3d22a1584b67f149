// The official MCP TypeScript SDK against the front door's resources and
// prompts (run by features_e2e_test.go TestEndToEndTypeScriptSDKResources
// with the SDK of .tools/npm): list and read resources, list templates and
// prompts, get a prompt, complete an argument, subscribe and receive
// notifications/resources/updated; a viewer is denied a dynamic resource by
// policy. Prints one JSON object.
const { createRequire } = require("node:module");
const sdk = createRequire(process.env.SDK_PACKAGE_JSON);
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = sdk("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ResourceUpdatedNotificationSchema } = sdk("@modelcontextprotocol/sdk/types.js");

const url = new URL(process.env.MCP_URL);
const out = { updated: [] };

async function connect(token, name) {
  const client = new Client({ name, version: "0" });
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: "Bearer " + token } } }));
  return client;
}

async function main() {
  const client = await connect(process.env.MCP_TOKEN, "toolplane-ts-features");
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { out.updated.push(n.params.uri); });
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  const stat = out.resources.find((u) => u.includes("demo://resource/static/document/"));
  const read = await client.readResource({ uri: stat });
  out.readUri = read.contents[0].uri;
  out.readBytes = (read.contents[0].text || read.contents[0].blob || "").length;
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  const p = await client.getPrompt({ name: "everything_args-prompt", arguments: { city: "Lyon" } });
  out.promptText = p.messages.map((m) => m.content.text || "").join(" ");
  const c = await client.complete({ ref: { type: "ref/prompt", name: "everything_completable-prompt" }, argument: { name: "department", value: "Eng" } });
  out.completion = c.completion.values;
  await client.subscribeResource({ uri: stat });
  await client.callTool({ name: "tool_search", arguments: { query: "select:everything_toggle-subscriber-updates" } });
  await client.callTool({ name: "everything_toggle-subscriber-updates", arguments: {} });
  for (let i = 0; i < 500 && !out.updated.includes(stat); i++) await new Promise((r) => setTimeout(r, 20));
  await client.unsubscribeResource({ uri: stat });
  await client.close();

  const viewer = await connect(process.env.MCP_VIEWER_TOKEN, "toolplane-ts-viewer");
  out.viewerTemplates = (await viewer.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  try {
    await viewer.readResource({ uri: "toolplane+mcp://everything/demo://resource/dynamic/text/3" });
    out.viewerDenied = "read allowed";
  } catch (e) {
    out.viewerDenied = String(e && e.message || e);
  }
  await viewer.close();
}

main().then(
  () => { process.stdout.write(JSON.stringify(out)); process.exit(0); },
  (e) => { out.error = String(e && e.stack || e); process.stdout.write(JSON.stringify(out)); process.exit(0); },
);
