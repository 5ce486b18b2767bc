"""The largest score of each article among its passages (or glosses), for the per-article passage rankings.

Every query takes, for each article, the best of its passages' BM25 scores and of their cosines, and the same for
its glosses. `np.maximum.at` does that unbuffered, one element at a time, which at ten times the Constitution's size
was about 0.3 ms of a 10 ms search. The grouping never changes after the index is loaded, so it is sorted once here
and each query is one gather and one `np.maximum.reduceat`. The result is exactly `np.maximum.at`'s.
"""

from __future__ import annotations

import numpy as np


class GroupMax:
    """Per-group maxima of scores whose group (article position) is fixed: `groups[i]` is score i's group."""

    def __init__(self, groups: np.ndarray) -> None:
        groups = np.asarray(groups, dtype=np.intp)
        order = np.argsort(groups, kind="stable")
        ordered = groups[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if ordered.size else np.empty(0, np.intp)
        self._order = order
        self._in_order = bool(np.array_equal(order, np.arange(order.size)))  # passages are stored article by article
        self._starts = starts
        self._ends = np.r_[starts[1:], ordered.size].astype(np.intp)
        self.groups = ordered[starts]  # the groups that have at least one score, ascending
        self._segment = {int(g): i for i, g in enumerate(self.groups)}

    def __len__(self) -> int:
        return int(self._order.size)

    def maximum_into(self, out: np.ndarray, scores: np.ndarray) -> None:
        """out[g] = max(out[g], the largest score of group g), for every group with scores (as `np.maximum.at`)."""
        if not self._starts.size:
            return
        values = scores if self._in_order else scores[self._order]
        out[self.groups] = np.maximum(out[self.groups], np.maximum.reduceat(values, self._starts))

    def members(self, group: int) -> np.ndarray:
        """The indices of the scores of `group`, ascending (empty if it has none)."""
        segment = self._segment.get(group)
        if segment is None:
            return np.empty(0, dtype=np.intp)
        return self._order[self._starts[segment] : self._ends[segment]]
