"""Lexvoz: a Spanish-speaking voice agent for Panamanian legal research."""
