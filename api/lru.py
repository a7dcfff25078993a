"""The service's and the plan workers' small caches."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable


class LRU:
    """A small thread-safe LRU; `get_or_make` builds a missing value once per key."""

    def __init__(self, size: int):
        self.size = size
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._making: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return None

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        value = self.get(key)
        if value is not None:
            return value
        with self._lock:
            lock = self._making.setdefault(key, threading.Lock())
        with lock:
            value = self.get(key)
            if value is None:
                value = make()
                self.put(key, value)
        with self._lock:
            self._making.pop(key, None)
        return value
