"""A clone without `../shared` still tests the search: the pinned Constitution is downloaded, checked and cached."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import constitution


@pytest.fixture
def served(constitution_bytes: bytes) -> Iterator[tuple[str, list[int]]]:
    """A loopback HTTP server handing out given bytes; yields its URL and a hit counter."""
    hits = [0]
    body = {"data": constitution_bytes}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits[0] += 1
            self.send_response(200)
            self.send_header("Content-Length", str(len(body["data"])))
            self.end_headers()
            self.wfile.write(body["data"])

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/constitucion_panama.json", hits
    finally:
        httpd.shutdown()


@pytest.fixture
def clone_without_shared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(constitution, "BESIDE_CHECKOUT", tmp_path / "no-shared" / "constitucion_panama.json")
    monkeypatch.delenv(constitution.ENV_OVERRIDE, raising=False)
    return tmp_path / "cache" / "constitucion.json"


def test_downloads_once_into_the_cache_and_reuses_it(clone_without_shared: Path, served: tuple[str, list[int]]) -> None:
    url, hits = served
    first = constitution.find_or_download(url=url, cache=clone_without_shared)
    again = constitution.find_or_download(url=url, cache=clone_without_shared)
    assert first.path == again.path == clone_without_shared
    assert hits[0] == 1  # the second lookup reads the cache
    assert not list(clone_without_shared.parent.glob("*.partial"))


def test_altered_download_is_refused_with_a_reason(
    clone_without_shared: Path, served: tuple[str, list[int]], constitution_bytes: bytes
) -> None:
    url, _ = served
    clone_without_shared.parent.mkdir(parents=True)
    clone_without_shared.write_bytes(constitution_bytes[:-10] + b"alterado!!")  # a tampered cache is not used
    found = constitution.find_or_download(url=url + "?x", cache=clone_without_shared)
    assert found.path == clone_without_shared  # re-downloaded over the tampered copy
    assert clone_without_shared.read_bytes() == constitution_bytes


def test_unreachable_source_gives_one_reason_and_no_file(clone_without_shared: Path) -> None:
    found = constitution.find_or_download(url="http://127.0.0.1:9/none.json", cache=clone_without_shared)
    assert found.path is None
    assert "could not be downloaded" in found.why_missing
    assert not clone_without_shared.exists()
