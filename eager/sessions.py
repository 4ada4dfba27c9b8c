"""The bounded LRU caches of one-op kernels and of whole-model sessions, and the report
of which backend ran last.

:data:`MODEL_SESSIONS` holds ``eager.run``'s sessions over whole models (keys in
:mod:`eager.model_session`); the rest of this docstring is about :data:`KERNELS`.

Key: ``(domain, op_type, since_version, attributes, input signature, output count)``
where the input signature is one ``(element type, rank)`` per input (``None`` for an
omitted optional one).  Shapes are not in the key: sessions declare unnamed dimensions,
so one session serves every shape of the same rank.  The schema's ``since_version``
stands for the opset, so opset 18 and opset 20 share a session for an op that did not
change between them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["CacheInfo", "KernelCache", "KERNELS", "MODEL_SESSIONS", "set_cache_size", "cache_info", "clear_cache",
           "set_model_cache_size", "model_cache_info", "BackendReport", "last_backend"]

DEFAULT_SIZE = 512
# Whole-model sessions hold a model's weights: few of them are kept.
DEFAULT_MODEL_SESSIONS = 8


class CacheInfo(NamedTuple):
    """Counters of the kernel cache, as ``functools.lru_cache`` reports them."""

    hits: int
    misses: int
    maxsize: int
    currsize: int
    evictions: int


class KernelCache:
    """An LRU map from cache key to kernel; building a missing kernel happens outside the lock."""

    def __init__(self, maxsize: int = DEFAULT_SIZE) -> None:
        self._entries: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, key: Any) -> Any:
        """The kernel for ``key`` (marked most recently used), or None."""
        entry = self._entries.get(key)
        if entry is not None:
            self.hits += 1
            try:
                self._entries.move_to_end(key)
            except KeyError:  # evicted by another thread in between: still usable
                pass
        return entry

    def add(self, key: Any, build: Callable[[], Any]) -> Any:
        """Build the kernel for a missing key, store it, and evict the least recently used."""
        self.misses += 1
        kernel = build()
        with self._lock:
            self._entries[key] = kernel
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
                self.evictions += 1
        return kernel

    def resize(self, maxsize: int) -> None:
        with self._lock:
            self.maxsize = maxsize
            while len(self._entries) > maxsize:
                self._entries.popitem(last=False)
                self.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = self.evictions = 0

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, self.maxsize, len(self._entries), self.evictions)


KERNELS = KernelCache()
# Sessions over whole models (eager.run), keyed by model and input signature (see eager.model_session).
MODEL_SESSIONS = KernelCache(DEFAULT_MODEL_SESSIONS)


def _checked_size(maxsize: int) -> int:
    from dsl.errors import EagerError

    if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
        raise EagerError(f"the cache size is a positive int, not {maxsize!r}", hint="e.g. eager.set_cache_size(256)")
    return maxsize


def set_cache_size(maxsize: int) -> None:
    """Bound the number of cached one-op sessions (least recently used ones are dropped).

    >>> import eager
    >>> eager.set_cache_size(64)
    >>> eager.cache_info().maxsize
    64
    """
    KERNELS.resize(_checked_size(maxsize))


def cache_info() -> CacheInfo:
    """Hits, misses, bound, current size and evictions of the session cache.

    >>> import eager
    >>> eager.cache_info().maxsize > 0
    True
    """
    return KERNELS.info()


def set_model_cache_size(maxsize: int) -> None:
    """Bound the number of cached whole-model sessions of ``eager.run`` (each holds its model's weights).

    >>> import eager
    >>> eager.set_model_cache_size(4)
    >>> eager.model_cache_info().maxsize
    4
    """
    MODEL_SESSIONS.resize(_checked_size(maxsize))


def model_cache_info() -> CacheInfo:
    """Hits, misses, bound, current size and evictions of the whole-model session cache.

    >>> import eager
    >>> eager.model_cache_info().maxsize > 0
    True
    """
    return MODEL_SESSIONS.info()


def clear_cache() -> None:
    """Drop every cached session (one-op and whole-model) and reset the counters.

    >>> import eager
    >>> eager.clear_cache()
    >>> eager.cache_info().currsize
    0
    """
    KERNELS.clear()
    MODEL_SESSIONS.clear()


class BackendReport(NamedTuple):
    """Which backend ran an op: ``backend`` is ``"onnxruntime"`` or ``"onnx.reference"``;
    ``reason`` is onnxruntime's error when it fell back."""

    op: str
    backend: str
    reason: str


class _Last(threading.local):
    kernel: Any = None
    runtime_reason: str = ""


LAST = _Last()


def last_backend() -> BackendReport | None:
    """The backend that ran the latest eager op call in this thread (None before any).

    >>> import numpy as np, eager
    >>> from dsl import opset18 as op
    >>> _ = op.Add(np.float32(1), np.float32(2))
    >>> eager.last_backend().backend
    'onnxruntime'
    """
    kernel = LAST.kernel
    if kernel is None:
        return None
    reason = LAST.runtime_reason or kernel.fallback_reason
    return BackendReport(kernel.label, kernel.backend, reason)
