"""Serve: the `search_panama_law` MCP tool over streamable HTTP, around one Searcher at a time.

Owns the tool's wire contract (`schema`), the ASGI app and its reload of a changed index (`server`), loading and
warming the Searcher it serves (`loading`), the Host and token checks (`access`), bounded MCP sessions
(`sessions`), keyed query fingerprints for the logs (`fingerprint`), and the record of which index generation each
running server serves (`served`).
"""
