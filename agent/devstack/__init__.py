"""Local development tooling: finding or building livekit-server and running the whole stack with `make run`.

Never imported by the worker or the page service; production deployments start each program on its own.
"""
