"""Unique, readable value names for one function, subgraphs included.

SSA gives every assignment a fresh value; the names stay close to the Python ones
(``d``, ``d_1``, ``d_2``) and are unique across the whole function, because ONNX
subgraphs may read outer values by name.
"""

from __future__ import annotations

__all__ = ["NameAllocator"]


class NameAllocator:
    """Hands out names never given before; amortised O(1) per name."""

    __slots__ = ("_next_suffix", "_used")

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._next_suffix: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        """``base`` itself if unused, otherwise ``base_1``, ``base_2``, ..."""
        if base not in self._used:
            self._used.add(base)
            return base
        suffix = self._next_suffix.get(base, 1)
        candidate = f"{base}_{suffix}"
        while candidate in self._used:
            suffix += 1
            candidate = f"{base}_{suffix}"
        self._next_suffix[base] = suffix + 1
        self._used.add(candidate)
        return candidate
