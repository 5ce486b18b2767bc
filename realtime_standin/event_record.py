"""A bounded, ordered record of what happened on the stand-in's connections, read by absolute position.

Why bounded: the stand-in also runs for hours (rehearsal mode, the soak benchmark), opening a connection per
conversation and receiving an audio append every 100 ms on each; a record that kept everything grew with every
connection ever opened. So it forgets a connection's entries when told to (the endpoint does so for closed
connections beyond the most recent few), and its oldest entries once it holds ``max_entries`` (one endless
connection).

Why absolute positions: readers hold places in it (``after=`` of the waiters, ``/control/events?since=``,
``/control/timings?since=``), and forgetting must not move them. ``len()`` is the position the next entry will
take, an index or slice names positions, and iteration yields only what is still kept. While nothing has been
forgotten it reads exactly like the list it replaced.
"""

from __future__ import annotations

import bisect
import itertools
from collections import deque
from collections.abc import Iterator
from typing import overload

from .protocol import JsonDict

__all__ = ["MAX_ENTRIES", "EventRecord"]

MAX_ENTRIES = 20_000
"""Per record: over 30 minutes of one connection's 100 ms audio appends, far more than any test reads."""


class EventRecord:
    """Entries (JSON objects) in arrival order, each tagged with the connection number it belongs to."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: deque[tuple[int, int, JsonDict]] = deque(maxlen=max_entries)  # (position, connection, entry)
        self._total = 0

    def append(self, entry: JsonDict, connection: int) -> None:
        self._entries.append((self._total, connection, entry))
        self._total += 1

    def forget(self, connection: int) -> None:
        """Drop every entry of ``connection``; the others keep their positions."""
        kept = [e for e in self._entries if e[1] != connection]
        if len(kept) != len(self._entries):
            self._entries = deque(kept, maxlen=self._entries.maxlen)

    @property
    def kept(self) -> int:
        """How many entries are still held (``len()`` counts every one ever recorded)."""
        return len(self._entries)

    def __len__(self) -> int:
        return self._total

    def __iter__(self) -> Iterator[JsonDict]:
        return (entry for _, _, entry in list(self._entries))

    def since(self, position: int) -> list[tuple[int, JsonDict]]:
        """The kept entries at positions >= ``position``, with their positions."""
        start = bisect.bisect_left(self._entries, position, key=lambda e: e[0])
        return [(pos, entry) for pos, _, entry in itertools.islice(self._entries, start, None)]

    @overload
    def __getitem__(self, key: int) -> JsonDict: ...

    @overload
    def __getitem__(self, key: slice) -> list[JsonDict]: ...

    def __getitem__(self, key: int | slice) -> JsonDict | list[JsonDict]:
        if isinstance(key, slice):
            start, stop, step = key.indices(self._total)
            if step != 1:
                raise ValueError("an event record only slices forward, one position at a time")
            return [entry for pos, entry in self.since(start) if pos < stop]
        position = key + self._total if key < 0 else key
        found = self.since(position)
        if not found or found[0][0] != position:
            raise IndexError(f"no entry at position {key} (never recorded, or forgotten)")
        return found[0][1]

    def index(self, entry: JsonDict) -> int:
        """The position of the first kept entry equal to ``entry``."""
        for pos, _, kept in self._entries:
            if kept == entry:
                return pos
        raise ValueError("entry not in the record")
