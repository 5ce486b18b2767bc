"""`python -m agent COMMAND`: one entry point for every Lexvoz program.

- `dev` / `start`: the LiveKit worker (same as `python -m livekit.agents start agent/worker.py [--dev]`)
- `web`: the token and page service
- `mcp-check URL`: check any MCP server against the search_panama_law contract
- `doctor`: check a deployment (LiveKit, dispatch, OpenAI key, MCP server, ledger, page build)
- `ledger show|export|purge|forget|migrate`: read and maintain the evidence ledger
- `run`: the whole local stack (livekit-server, search server, page service, worker)
- `livekit-server`: find or build the livekit-server binary and print its path
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

USAGE = __doc__ or ""


def _livekit(command: list[str]) -> int:
    # Before livekit-agents is imported: it creates metrics, which prometheus_client writes into this folder.
    from agent.ops.private_dir import MultiprocessDirError, check_env_dir

    try:
        check_env_dir()
    except MultiprocessDirError as exc:
        print(f"lexvoz: {exc}", file=sys.stderr)
        return 2
    worker = Path(__file__).with_name("worker.py")
    sys.argv = ["livekit.agents", *command[:1], str(worker), *command[1:]]
    runpy.run_module("livekit.agents", run_name="__main__", alter_sys=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE.strip())
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "dev":
        return _livekit(["start", "--dev", *rest])
    if command in ("start", "console"):
        return _livekit([command, *rest])
    if command == "web":
        from agent.web.app import main as web_main

        return web_main(rest)
    if command == "mcp-check":
        from agent.mcp.check import main as check_main

        return check_main(rest)
    if command == "doctor":
        from agent.doctor import main as doctor_main

        return doctor_main(rest)
    if command == "ledger":
        from agent.ops.ledger.cli import ledger_main

        return ledger_main(rest)
    if command == "livekit-server":
        from agent.devstack.livekit_server import main as lk_main

        return lk_main(rest)
    if command == "run":
        from agent.devstack.stack import main as stack_main

        return stack_main(rest)
    print(f"unknown command {command!r}\n\n{USAGE.strip()}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
