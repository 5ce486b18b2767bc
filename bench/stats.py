"""Figures every benchmark reports, computed one way."""

from __future__ import annotations

import numpy as np


def percentile(values: list[float], pct: float) -> float:
    """The `pct`-th percentile (0-100) of `values`, as an observed value (nearest rank), not an interpolation."""
    return float(np.percentile(np.asarray(values, dtype=float), pct, method="closest_observation"))
