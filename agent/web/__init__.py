"""The token and page service: a separate program that serves the built page and short-lived LiveKit tokens.

It shares only the settings with the worker. Credentials stay here: the browser receives a token for its
own room and nothing else.
"""
