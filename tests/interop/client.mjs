// Test-only MCP client written with the official TypeScript SDK: connects to URL, lists the tools, calls
// search_panama_law once, and prints {protocolVersion, tools, result} as JSON on stdout.
//
//   node client.mjs URL QUERY [TOKEN]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, query, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : {},
});
const client = new Client({ name: 'lexvoz-interop-client', version: '0.1.0' });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  // callTool validates structuredContent against the tool's outputSchema, as a strict client would.
  const result = await client.callTool({ name: 'search_panama_law', arguments: { query } });
  console.log(
    JSON.stringify({ protocolVersion: transport.protocolVersion ?? null, tools, result }, null, 0),
  );
  await transport.terminateSession().catch(() => {});
  await client.close();
} catch (err) {
  console.error(`interop client failed: ${err?.message ?? err}`);
  process.exit(1);
}
