"""The MCP client: everything between a search call and a search server.

Owns the connection to the configured `search_panama_law` server (streamable HTTP, bearer token), the
contract check on connect, argument and result bounds, timeouts, the single retry for transient faults,
the circuit breaker, reconnection, and the `mcp-check` command that runs the same checks by hand. It knows
nothing of rooms or voices: it takes arguments and returns validated sources or one typed error.

Modules: `gateway` (the facade callers use), `transport` (the httpx transport: no standalone GET, byte
cap, wire probe), `connection` (one session's lifecycle and contract check), `policy` (deadline, retry,
breaker, connect budget), `errors` (the typed `GatewayError` and its classification), `breaker`, `check`,
`shared` (the one gateway per process, on its own loop thread, that conversations on any thread call).
"""
