"""Ingest: from source files to checked articles, before anything touches the index.

Owns reading each supported format (the pinned Constitution JSON, norm text, PDF, JSONL, with their sidecars),
verifying it (checksum, shape, labels), splitting a norm's text into articles, and reading the glosses worksheets.
It produces `ParsedNorm`s and never reads or writes the index: a refused file costs nothing downstream.
"""
