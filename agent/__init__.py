"""Lexvoz: a Spanish-speaking voice agent for Panamanian legal research.

`agent.worker` is the entry the LiveKit CLI loads. The roles live in subpackages, and imports run one way:

    worker -> voice, waiting_rooms -> mcp -> ops -> contract, settings
    web, devstack -> settings

- `voice`: the conversation in one room (agent, tool, turn guard, evidence messages).
- `waiting_rooms`: on each registration, rooms whose offer went to no worker are offered again.
- `mcp`: the guarded MCP client (gateway, breaker, contract checks, `mcp-check`).
- `ops`: metrics, traces, the evidence ledger and redaction.
- `web`: the token and page service (a separate program).
- `devstack`: local tooling (livekit-server builder, `make run`).
- `contract` and `settings`: the shared types and the one typed settings object.
"""
