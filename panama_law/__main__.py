"""Command line: `python -m panama_law {serve,download,import,norms,glosses,remove,search,eval}`.

Flags override PANAMA_LAW_* environment variables; errors print one line and exit non-zero, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .index.disk import IndexLoadError
from .ingest.corpus import CorpusError
from .ingest.sources import ImportOptions
from .serve.fingerprint import FingerprintKeyError
from .settings import ServerSettings

DEFAULT_WAIT_S = 5.0
"""How long `import` and `remove` wait for running search servers to serve the change: the Constitution's index
with a small law reloads in about half a second (bench/norm_reload.py), a second or two on a busy host."""


def _settings(args: argparse.Namespace) -> ServerSettings:
    overrides: dict[str, Any] = {}
    for name in ("host", "port", "token", "data_dir", "source", "norms_dir", "gloss_model"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return ServerSettings(**overrides)


EXIT_REFUSED = 2
"""`serve` refused its settings before serving anything (a non-loopback bind without a token)."""


def _cmd_serve(settings: ServerSettings) -> int:
    if not settings.is_loopback and settings.token is None:
        # Anyone who can reach the address could search, open sessions and spend the server's CPU: say so and stop.
        print(
            f"error: refusing to serve on {settings.host} without a token: set PANAMA_LAW_TOKEN (or --token), "
            "or bind to 127.0.0.1",
            file=sys.stderr,
        )
        return EXIT_REFUSED

    import uvicorn
    from threadpoolctl import threadpool_limits

    from .serve.fingerprint import load_or_create_key
    from .serve.loading import load_searcher, open_searcher
    from .serve.server import ServerState, SessionLimits, build_app

    if settings.host.strip("[]") in ("0.0.0.0", "::") and not settings.allowed_hosts:
        logging.getLogger("panama_law").warning(
            "serving on %s, but only requests naming %s as Host are answered: set PANAMA_LAW_ALLOWED_HOSTS to the "
            "name clients connect to",
            settings.host,
            ", ".join(settings.allowed_host_names),
        )
    # One BLAS thread for the whole process. Each search asks for one (`embedding.one_blas_thread`), but that is a
    # process-wide setting entered and restored by every search, and searches now run in threads side by side: one
    # ending would hand a running one back the default, busy-waiting threads.
    threadpool_limits(limits=1, user_api="blas")
    state = ServerState()
    app = build_app(
        state,
        token=settings.token.get_secret_value() if settings.token else None,
        allowed_hosts=settings.allowed_host_names,
        search_threads=settings.search_threads,
        loader=lambda: load_searcher(settings),
        limits=SessionLimits(
            per_client=settings.max_sessions_per_client,
            total=settings.max_sessions,
            idle_s=settings.session_idle_timeout_s,
        ),
        fingerprint_key=load_or_create_key(settings.digest_key_file),
        data_dir=settings.data_dir,
        reloader=lambda: open_searcher(settings.data_dir),
    )
    # uvicorn traps SIGTERM/SIGINT: stops accepting, lets in-flight requests finish, runs the lifespan exit.
    # Its "auto" loop and HTTP parser are uvloop and httptools, installed with this package for that: they cut the
    # server's own CPU per tools/call by about a fifth (0.7 ms of 3.7) against asyncio and the pure-Python h11.
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=10,
        lifespan="on",
        loop="auto",
        http="auto",
    )
    uvicorn.Server(config).run()
    return 0


def _cmd_download(settings: ServerSettings) -> int:
    from .index.build import download_and_build

    path = download_and_build(settings.source_url, settings.data_dir, settings.source_sha256)
    print(f"index built at {path}")
    return 0


def _report_uptake(data_dir: Path, wait_s: float) -> None:
    """One line on whether the running search servers on this data dir serve the index just written.

    Each server records the generation it serves in the data dir (`served.record_served`), so this works with any
    number of data dirs and servers on one machine, asks no port, and returns at once when no server runs there."""
    from .index.disk import IndexLoadError, current_generation
    from .serve.served import wait_until_served

    try:
        generation = current_generation(data_dir)
    except IndexLoadError:
        generation = None
    if generation is None:
        return
    uptake = wait_until_served(data_dir, generation, max(0.0, wait_s))
    if uptake.after_s is not None:
        who = (
            "the running search server now serves"
            if uptake.running == 1
            else f"the {uptake.running} running search servers now serve"
        )
        print(f"{who} it (after {uptake.after_s:.1f} s)")
    elif uptake.running:
        print(
            f"{uptake.running - uptake.serving} of {uptake.running} running search servers have not taken it yet "
            f"(waited {wait_s:g} s); each picks it up on its own once its load finishes"
        )
    else:
        print("no running search server has taken it yet; a server picks it up on its own, or when it starts")


def _cmd_import(settings: ServerSettings, args: argparse.Namespace) -> int:
    from .index.build import import_folder, import_norms, write_file_glosses, write_folder_glosses

    path: Path = args.path
    if args.write_glosses and args.glosses:
        raise ValueError("--glosses imports a worksheet and --write-glosses writes one; use one of the two")
    if args.glosses_out and not args.write_glosses:
        raise ValueError("--glosses-out names the worksheet --write-glosses writes; give --write-glosses too")
    if path.is_dir():
        if any(getattr(args, flag) for flag in ("norm", "date", "gaceta", "url", "glosses", "glosses_out")):
            raise ValueError(
                "--norm/--date/--gaceta/--url/--glosses/--glosses-out name one file; a folder's files use "
                "NAME.meta.json and NAME.glosses.jsonl sidecars"
            )
        if args.write_glosses:
            write_folder_glosses(path, settings, args.yes)
        outcomes = import_folder(path, settings.data_dir)
        for o in outcomes:
            state = f"refused: {o.error}" if o.error else "unchanged" if o.unchanged else "imported"
            print(f"{o.file}: {state}" + (f" ({', '.join(o.norms)})" if o.norms else ""))
        if any(not o.error and not o.unchanged for o in outcomes):
            _report_uptake(settings.data_dir, args.wait)
        return 1 if any(o.error for o in outcomes) else 0
    options = ImportOptions(
        norm=args.norm,
        date=args.date,
        gaceta=args.gaceta,
        url=args.url,
        expected_sha256=settings.source_sha256 if not args.no_checksum else None,
        glosses=args.glosses,
    )
    if args.write_glosses:  # then imported exactly as `--glosses WORKSHEET` would be
        options = replace(options, glosses=write_file_glosses(path, options, settings, args.glosses_out, args.yes))
    for info in import_norms(path, settings.data_dir, options):
        print(f"imported {info.name}: {info.article_count} articles")
    print(f"index at {settings.data_dir}")
    _report_uptake(settings.data_dir, args.wait)
    return 0


def _cmd_norms(settings: ServerSettings) -> int:
    from .index.disk import list_norms, norm_glosses

    for info in list_norms(settings.data_dir):
        meta = [f"{k} {v}" for k, v in (("date", info.date), ("gaceta", info.gaceta), ("url", info.url)) if v]
        glossed = sum(len(g) for g in norm_glosses(settings.data_dir, info.name).values())
        counts = f"{info.article_count} articles, {glossed} glosses"
        print(f"{info.name}\t{counts}\t{info.kind}" + (f"\t{'; '.join(meta)}" if meta else ""))
    return 0


def _cmd_glosses(settings: ServerSettings, name: str) -> int:
    """A norm's articles as a glosses worksheet: one JSON line per article, the form `import --glosses` reads.

    Glosses are what lift a team's own law from about 0.55-0.8 to about 0.9 recall@3 (README), and writing them
    needs each article's label as the index knows it and its text at hand; the lines carry both, with the
    heading path and any glosses the norm has now, so a worksheet filled in and imported again round-trips."""
    from .index.disk import list_norms, norm_articles, norm_glosses
    from .ingest.gloss_store import worksheet_rows

    names = [info.name for info in list_norms(settings.data_dir)]
    if name not in names:  # worded as `remove` words it
        raise ValueError(f"no norm named {name!r} in the index (indexed: {', '.join(names) or 'none'})")
    articles = norm_articles(settings.data_dir, name)
    for row in worksheet_rows(articles, norm_glosses(settings.data_dir, name)):  # as `import --write-glosses`
        print(json.dumps(row, ensure_ascii=False))
    return 0


def _cmd_remove(settings: ServerSettings, name: str, wait_s: float) -> int:
    from .index.store import remove_norm

    remove_norm(settings.data_dir, name)
    print(f"removed {name}")
    _report_uptake(settings.data_dir, wait_s)
    return 0


def _cmd_search(settings: ServerSettings, question: str, as_json: bool) -> int:
    from .index import disk as index
    from .retrieve.search import Searcher
    from .serve.schema import check_query_size, text_rendering, to_source, validate_query

    query = validate_query({"query": question})
    searcher = Searcher(index.load(settings.data_dir))
    check_query_size(query)
    sources = [to_source(hit) for hit in searcher.search(query)]
    print(json.dumps({"results": sources}, ensure_ascii=False, indent=2) if as_json else text_rendering(sources))
    return 0


def _cmd_eval(settings: ServerSettings, path: Path, details: bool) -> int:
    from .evaluate import evaluate, load_items
    from .index import disk as index
    from .retrieve.search import Searcher

    report = evaluate(Searcher(index.load(settings.data_dir)), load_items(path), details=details)
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m panama_law", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def data_dir_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", dest="data_dir", type=Path, help="index directory (env PANAMA_LAW_DATA_DIR)")

    def wait_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--wait",
            type=float,
            default=DEFAULT_WAIT_S,
            metavar="SECONDS",
            help=f"how long to wait for running search servers to take the change (default {DEFAULT_WAIT_S:g})",
        )

    serve = sub.add_parser("serve", help="serve search_panama_law over MCP streamable HTTP")
    serve.add_argument("--host", help="bind address (env PANAMA_LAW_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (env PANAMA_LAW_PORT, default 8765)")
    serve.add_argument("--token", help="require this bearer token (env PANAMA_LAW_TOKEN)")
    serve.add_argument("--source", type=Path, help="local source JSON for a first-run build (env PANAMA_LAW_SOURCE)")
    serve.add_argument(
        "--norms-dir", type=Path, help="import every norm file in this folder at start (env PANAMA_LAW_NORMS_DIR)"
    )
    data_dir_flag(serve)

    download = sub.add_parser("download", help="fetch the pinned Constitution JSON, verify it, build the index")
    data_dir_flag(download)

    imp = sub.add_parser(
        "import",
        help="add a norm (Constitution .json, law .txt/.pdf, .jsonl; or a folder of them), replacing one of that name",
    )
    imp.add_argument("path", type=Path)
    imp.add_argument("--norm", help="the norm's name as cited, e.g. 'Ley 6 de 2002' (default: sidecar or file name)")
    imp.add_argument("--date", help="publication date, YYYY-MM-DD")
    imp.add_argument("--gaceta", help="Gaceta Oficial number")
    imp.add_argument("--url", help="official source link (http/https)")
    imp.add_argument(
        "--glosses",
        type=Path,
        help='callers\' wordings per article, one JSON line each: {"article": "12-A", "glosses": ["...", ...]}',
    )
    imp.add_argument(
        "--write-glosses",
        action="store_true",
        help="have an OpenAI model write the glosses (OPENAI_API_KEY), into NAME.glosses.jsonl, then import them",
    )
    imp.add_argument("--glosses-out", type=Path, help="where --write-glosses writes the worksheet")
    imp.add_argument("--gloss-model", help="the model --write-glosses asks (env PANAMA_LAW_GLOSS_MODEL)")
    imp.add_argument("--yes", action="store_true", help="accept --write-glosses' cost estimate without asking")
    imp.add_argument(
        "--no-checksum", action="store_true", help="accept a Constitution JSON that differs from the pinned sha256"
    )
    data_dir_flag(imp)
    wait_flag(imp)

    norms = sub.add_parser("norms", help="list the indexed norms with their article counts and metadata")
    data_dir_flag(norms)

    gl = sub.add_parser(
        "glosses",
        help="print a norm's articles as a glosses worksheet (JSON lines); fill in 'glosses', then import --glosses",
    )
    gl.add_argument("name")
    data_dir_flag(gl)

    rm = sub.add_parser("remove", help="remove one norm from the index, by its exact name")
    rm.add_argument("name")
    data_dir_flag(rm)
    wait_flag(rm)

    se = sub.add_parser("search", help="print the sources the tool would return for a question")
    se.add_argument("question")
    se.add_argument("--json", action="store_true", help='print {"results": [...]} exactly as the tool returns it')
    data_dir_flag(se)

    ev = sub.add_parser("eval", help="retrieval metrics for a JSONL file of {question, gold: [citations or numbers]}")
    ev.add_argument("file", type=Path)
    ev.add_argument("--details", action="store_true", help="also print per-question rankings")
    data_dir_flag(ev)

    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("mcp").setLevel(logging.WARNING)  # the SDK logs one INFO line per request otherwise
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # one INFO line per file event otherwise
    for name in ("httpx", "httpx2", "openai"):  # `import --write-glosses`: one INFO line per model request otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        settings = _settings(args)
        if args.command == "serve":
            return _cmd_serve(settings)
        if args.command == "download":
            return _cmd_download(settings)
        if args.command == "import":
            return _cmd_import(settings, args)
        if args.command == "norms":
            return _cmd_norms(settings)
        if args.command == "glosses":
            return _cmd_glosses(settings, args.name)
        if args.command == "remove":
            return _cmd_remove(settings, args.name, args.wait)
        if args.command == "search":
            return _cmd_search(settings, args.question, args.json)
        return _cmd_eval(settings, args.file, args.details)
    except ValidationError as exc:
        err = exc.errors()[0]
        print(f"error: invalid setting {err['loc'][0] if err['loc'] else '?'}: {err['msg']}", file=sys.stderr)
    except (CorpusError, IndexLoadError, FingerprintKeyError, OSError, ValueError) as exc:
        # NormError and QueryError are ValueErrors: one line, never a traceback.
        print(f"error: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
