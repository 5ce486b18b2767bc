"""End-to-end tests: real livekit-server, worker, Realtime stand-in, search server and token service."""
