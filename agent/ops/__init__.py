"""Operations: what an operator or an auditor reads about conversations, never their content in clear.

Owns Prometheus metrics, OpenTelemetry spans, the append-only evidence ledger (`agent.ops.ledger`: a
SQLite file or a PostgreSQL database shared by every worker, its writer, retention and its CLI), keyed
digests and the redaction of personal data in logs and records. It depends only on the shared contract
and settings, so every other role can report to it without import cycles.
"""
