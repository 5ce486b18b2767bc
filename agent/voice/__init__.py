"""The conversation: the voice agent, its one tool, the stale-turn guard and the evidence it shows.

Owns what happens inside one room: the `LexvozAgent` and its Spanish instructions, the realtime model it
talks through, the `ResearchSession` that runs each search call under the turn guard, and the
`lexvoz.research` messages the page renders. It calls the MCP client (`agent.mcp`) for evidence and
reports to operations (`agent.ops`); neither of those imports it back.
"""
