"""How a running server gets its Searcher: built if missing, loaded and warmed at start, reopened on a change.

Kept apart from `panama_law.index.build`, which writes the index: turning the index into a Searcher belongs to the
stages that search and serve it, and the index stage never imports them.
"""

from __future__ import annotations

import threading
from pathlib import Path

from .. import embedding
from ..index import disk as index
from ..index.build import ensure_index, gloss_norms_folder
from ..retrieve.search import Searcher
from ..settings import ServerSettings


def load_searcher(settings: ServerSettings) -> Searcher:
    """Ensure, load and warm up: the first query should be as fast as the rest."""
    ensure_index(settings)
    searcher = open_searcher(settings.data_dir)
    embedding.warm_up()
    searcher.search("derechos fundamentales")
    if settings.write_glosses and settings.norms_dir is not None:  # served now; glosses follow, minutes later
        threading.Thread(target=gloss_norms_folder, args=(settings,), name="write-glosses", daemon=True).start()
    return searcher


def open_searcher(data_dir: Path) -> Searcher:
    """The index as it is now, read whole and ready to answer: what a running server swaps in when the file changes.

    Nothing is written (the first-run build, the norms folder and the glosses refresh are the start's business), and
    no warm-up search runs: the encoder is warm already, and a search here would share its BLAS thread limit with
    the searches the server is answering meanwhile."""
    return Searcher(index.load(data_dir))
