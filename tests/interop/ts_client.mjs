// Interop with the official MCP TypeScript SDK (`@modelcontextprotocol/sdk`, the client most
// desktop hosts embed), driven by tests/it/interop_ts.rs against the real binary. The SDK
// validates every result strictly (ping included) and checks structuredContent against
// each tool's outputSchema. Prints one JSON summary line; exits non-zero on any failure.
//
// usage: node ts_client.mjs --sdk DIR --server BIN --workspace DIR [--url URL --token T]
import { createRequire } from "node:module";
import path from "node:path";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, v, i, all) => (i % 2 ? acc : [...acc, [v.replace(/^--/, ""), all[i + 1]]]), [])
);
const require = createRequire(path.resolve(args.sdk, "node_modules", "x.js"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function main() {
  const client = new Client({ name: "winx-ts-interop", version: "1.0.0" });
  const transport = args.url
    ? new StreamableHTTPClientTransport(new URL(args.url), {
        requestInit: { headers: { Authorization: `Bearer ${args.token}` } },
      })
    : new StdioClientTransport({ command: args.server, args: [], env: process.env, stderr: "inherit" });
  const started = Date.now();
  await client.connect(transport);
  const connectMs = Date.now() - started;
  await client.ping();
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  check(names.includes("Initialize") && names.includes("BashCommand"), `tools: ${names}`);
  const init = await client.callTool({
    name: "Initialize",
    arguments: { type: "first_call", workspace_root: args.workspace },
  });
  check(!init.isError, `Initialize: ${JSON.stringify(init)}`);
  const pair = {
    thread_id: init.structuredContent.data.thread_id,
    workspace_root: init.structuredContent.data.workspace_root,
  };
  const echo = await client.callTool({
    name: "BashCommand",
    arguments: { ...pair, action_json: { command: "echo ts-sdk-$((20+22))" } },
  });
  check(!echo.isError && echo.content[0].text.includes("ts-sdk-42"), `echo: ${JSON.stringify(echo)}`);
  const read = await client.callTool({ name: "ReadFiles", arguments: { ...pair, file_paths: ["README.md"] } });
  check(read.content[0].text.includes("interop fixture"), `ReadFiles: ${JSON.stringify(read)}`);
  // Prompts and resources: the SDK validates each result against its schema.
  const caps = client.getServerCapabilities();
  check(caps.prompts && caps.resources, `capabilities: ${JSON.stringify(caps)}`);
  const { prompts } = await client.listPrompts();
  check(prompts.length === 1 && prompts[0].name === "handoff", `prompts: ${JSON.stringify(prompts)}`);
  const handoff = await client.getPrompt({ name: "handoff", arguments: { thread_id: pair.thread_id } });
  check(handoff.messages[0].content.text.includes(pair.thread_id), `handoff: ${JSON.stringify(handoff)}`);
  const howTo = await client.getPrompt({ name: "handoff" });
  check(howTo.messages[0].content.text.includes("Initialize"), `handoff without a session: ${JSON.stringify(howTo)}`);
  const { resources } = await client.listResources();
  check(resources.length === 1 && resources[0].mimeType === "text/markdown", `resources: ${JSON.stringify(resources)}`);
  const readme = await client.readResource({ uri: resources[0].uri });
  check(readme.contents[0].text.includes("winx"), `readResource: ${JSON.stringify(readme).slice(0, 300)}`);
  const missing = await client.readResource({ uri: "winx://docs/nope.md" }).then(
    () => null,
    (e) => e
  );
  check(missing && missing.code === -32602, `unknown resource: ${missing}`);
  const unknown = await client.callTool({ name: "NoSuchTool", arguments: {} });
  check(unknown.isError === true, `unknown tool: ${JSON.stringify(unknown)}`);
  await client.ping();
  await client.close();
  console.log(JSON.stringify({ ok: true, connectMs, tools: names.length }));
}

main().catch((e) => {
  console.log(JSON.stringify({ ok: false, error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
});
