// Test-only MCP search server written with the official TypeScript SDK, so the gateway is checked
// against a foreign implementation and not only against the Python SDK it is built on.
//
//   node server.mjs [--stateless] [--json] [--old-protocol] [--no-output-schema] [--bad-output] [--token T]
//
// Listens on a free loopback port and prints `listening PORT` once ready. Every result is synthetic.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const args = new Set(process.argv.slice(2));
const tokenIndex = process.argv.indexOf('--token');
const token = tokenIndex > 0 ? process.argv[tokenIndex + 1] : null;
const stateless = args.has('--stateless');
const json = args.has('--json');
const OLD_PROTOCOL = '2025-03-26';

// What zod-based servers advertise: additionalProperties false at every level.
const OUTPUT_SCHEMA = {
  type: 'object',
  properties: {
    results: {
      type: 'array',
      items: {
        type: 'object',
        properties: { title: { type: 'string' }, citation: { type: 'string' }, excerpt: { type: 'string' } },
        required: ['title', 'citation', 'excerpt'],
        additionalProperties: false,
      },
    },
  },
  required: ['results'],
  additionalProperties: false,
};

function makeServer() {
  const server = new Server({ name: 'lexvoz-interop-ts', version: '0.1.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: 'search_panama_law',
        description: 'Búsqueda sintética (servidor de interoperabilidad en TypeScript).',
        inputSchema: {
          type: 'object',
          properties: { query: { type: 'string', minLength: 1, maxLength: 2000 } },
          required: ['query'],
          additionalProperties: false,
        },
        ...(args.has('--no-output-schema') ? {} : { outputSchema: OUTPUT_SCHEMA }),
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const query = String(request.params.arguments?.query ?? '');
    const results = [1, 2].map((n) => ({
      title: `Ley Sintética TS, título ${n}`,
      citation: `Ley Sintética TS, artículo ${n}`,
      excerpt: `Texto sintético ${n} para la consulta de ${query.length} caracteres.`,
    }));
    const structuredContent = args.has('--bad-output') ? { results, score: 0.5 } : { results };
    return { content: [{ type: 'text', text: JSON.stringify(structuredContent) }], structuredContent };
  });
  return server;
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

const sessions = new Map();

const http = createServer(async (req, res) => {
  try {
    if (token && req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    if (args.has('--old-protocol') && body?.method === 'initialize') {
      body.params.protocolVersion = OLD_PROTOCOL; // as if the client had offered only the older revision
    }
    if (stateless) {
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
      const server = makeServer();
      res.on('close', () => {
        transport.close();
        server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
    const sessionId = req.headers['mcp-session-id'];
    let transport = sessionId ? sessions.get(sessionId) : undefined;
    if (!transport && body?.method === 'initialize') {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: json,
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await makeServer().connect(transport);
    }
    if (!transport) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
      return;
    }
    await transport.handleRequest(req, res, body);
  } catch (err) {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(`interop server error: ${err}`);
  }
});

http.listen(0, '127.0.0.1', () => {
  console.log(`listening ${http.address().port}`);
});
process.on('SIGTERM', () => http.close(() => process.exit(0)));
