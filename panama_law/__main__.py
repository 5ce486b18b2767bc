"""Command line: `python -m panama_law {serve,download,import,eval}`.

Flags override PANAMA_LAW_* environment variables; errors print one line and exit non-zero, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .corpus import CorpusError
from .fingerprint import FingerprintKeyError
from .index import IndexLoadError
from .settings import ServerSettings


def _settings(args: argparse.Namespace) -> ServerSettings:
    overrides: dict[str, Any] = {}
    for name in ("host", "port", "token", "data_dir", "source"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return ServerSettings(**overrides)


def _cmd_serve(settings: ServerSettings) -> int:
    import uvicorn

    from .build import load_searcher
    from .fingerprint import load_or_create_key
    from .server import ServerState, SessionLimits, build_app

    state = ServerState()
    app = build_app(
        state,
        token=settings.token.get_secret_value() if settings.token else None,
        loopback=settings.is_loopback,
        loader=lambda: load_searcher(settings),
        limits=SessionLimits(
            per_client=settings.max_sessions_per_client,
            total=settings.max_sessions,
            idle_s=settings.session_idle_timeout_s,
        ),
        fingerprint_key=load_or_create_key(settings.digest_key_file),
    )
    # uvicorn traps SIGTERM/SIGINT: stops accepting, lets in-flight requests finish, runs the lifespan exit.
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=10,
        lifespan="on",
    )
    uvicorn.Server(config).run()
    return 0


def _cmd_download(settings: ServerSettings) -> int:
    from .build import download_and_build

    path = download_and_build(settings.source_url, settings.data_dir, settings.source_sha256)
    print(f"index built at {path}")
    return 0


def _cmd_import(settings: ServerSettings, path: Path, checksum: bool) -> int:
    from .build import import_file

    built = import_file(path, settings.data_dir, settings.source_sha256 if checksum else None)
    print(f"index built at {built}")
    return 0


def _cmd_eval(settings: ServerSettings, path: Path, details: bool) -> int:
    from . import index
    from .evaluate import evaluate, load_items
    from .search import Searcher

    report = evaluate(Searcher(index.load(settings.data_dir)), load_items(path), details=details)
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m panama_law", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def data_dir_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", dest="data_dir", type=Path, help="index directory (env PANAMA_LAW_DATA_DIR)")

    serve = sub.add_parser("serve", help="serve search_panama_law over MCP streamable HTTP")
    serve.add_argument("--host", help="bind address (env PANAMA_LAW_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (env PANAMA_LAW_PORT, default 8765)")
    serve.add_argument("--token", help="require this bearer token (env PANAMA_LAW_TOKEN)")
    serve.add_argument("--source", type=Path, help="local source JSON for a first-run build (env PANAMA_LAW_SOURCE)")
    data_dir_flag(serve)

    download = sub.add_parser("download", help="fetch the pinned Constitution JSON, verify it, build the index")
    data_dir_flag(download)

    imp = sub.add_parser("import", help="build the index from a local copy of the Constitution JSON")
    imp.add_argument("path", type=Path)
    imp.add_argument("--no-checksum", action="store_true", help="accept a file that differs from the pinned sha256")
    data_dir_flag(imp)

    ev = sub.add_parser("eval", help="retrieval metrics for a JSONL file of {question, gold}")
    ev.add_argument("file", type=Path)
    ev.add_argument("--details", action="store_true", help="also print per-question rankings")
    data_dir_flag(ev)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("mcp").setLevel(logging.WARNING)  # the SDK logs one INFO line per request otherwise
    try:
        settings = _settings(args)
        if args.command == "serve":
            return _cmd_serve(settings)
        if args.command == "download":
            return _cmd_download(settings)
        if args.command == "import":
            return _cmd_import(settings, args.path, checksum=not args.no_checksum)
        return _cmd_eval(settings, args.file, args.details)
    except ValidationError as exc:
        err = exc.errors()[0]
        print(f"error: invalid setting {err['loc'][0] if err['loc'] else '?'}: {err['msg']}", file=sys.stderr)
    except (CorpusError, IndexLoadError, FingerprintKeyError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
