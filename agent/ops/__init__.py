"""Operations: what an operator or an auditor reads about conversations, never their content in clear.

Owns Prometheus metrics, OpenTelemetry spans, the append-only evidence ledger (and its CLI), and the
redaction of personal data in logs and records. It depends only on the shared contract and settings, so
every other role can report to it without import cycles.
"""
