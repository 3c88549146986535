"""`LRUCache`: a bounded mapping that evicts the least recently used key."""

from collections import OrderedDict

_MISSING = object()


class LRUCache:
    """A mapping of at most `capacity` keys. `get` and `put` make a key the most recently used.

    `peek`, `in` and `len` look without touching recency or the hit/miss statistics.
    """

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._data = OrderedDict()  # oldest first

    def get(self, key, default=None):
        if key in self._data:
            self._data.move_to_end(key)
            self.hits += 1
            return self._data[key]
        self.misses += 1
        return default

    def peek(self, key, default=None):
        return self._data.get(key, default)

    def put(self, key, value):
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def delete(self, key):
        """Remove `key`; returns whether it was there."""
        return self._data.pop(key, _MISSING) is not _MISSING

    def resize(self, capacity):
        """Change the capacity, evicting the least recently used keys that no longer fit."""
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        while len(self._data) > capacity:
            self._data.popitem(last=False)

    def keys(self):
        """Keys from the least to the most recently used."""
        return list(self._data)

    @property
    def hit_rate(self):
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data
