"""The ordered item list of one Realtime conversation.

The real API keeps a single default conversation per connection and places every item after a
``previous_item_id`` (``"root"`` meaning "first"); the client mirrors that order, so the stand-in
must honour it rather than always appending.
"""

from __future__ import annotations

from typing import Any

JsonDict = dict[str, Any]

ROOT = "root"


class ItemNotFoundError(KeyError):
    pass


class DuplicateItemError(ValueError):
    pass


class Conversation:
    def __init__(self) -> None:
        self._items: list[JsonDict] = []

    @property
    def items(self) -> list[JsonDict]:
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item_id: object) -> bool:
        return any(i["id"] == item_id for i in self._items)

    def get(self, item_id: str) -> JsonDict | None:
        for item in self._items:
            if item["id"] == item_id:
                return item
        return None

    @property
    def tail_id(self) -> str | None:
        return self._items[-1]["id"] if self._items else None

    def insert(self, item: JsonDict, previous_item_id: str | None = None) -> str | None:
        """Insert ``item`` and return the id it now follows (``None`` when it is first).

        ``previous_item_id=None`` appends; ``"root"`` puts the item first; any other id must exist.
        """
        if item["id"] in self:
            raise DuplicateItemError(item["id"])
        if previous_item_id is None:
            prev = self.tail_id
            self._items.append(item)
            return prev
        if previous_item_id == ROOT:
            self._items.insert(0, item)
            return None
        for index, existing in enumerate(self._items):
            if existing["id"] == previous_item_id:
                self._items.insert(index + 1, item)
                return previous_item_id
        raise ItemNotFoundError(previous_item_id)

    def delete(self, item_id: str) -> JsonDict:
        for index, existing in enumerate(self._items):
            if existing["id"] == item_id:
                return self._items.pop(index)
        raise ItemNotFoundError(item_id)
