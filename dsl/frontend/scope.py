"""Name binding: each block (function body, branch, loop body) maps names to operands.

A nested block reads through to its parent, so a branch or loop body sees every value
defined before it (ONNX outer-scope capture), while its own assignments stay local until
the If/Loop that owns it decides which of them flow out.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Scope"]


class Scope:
    """Bindings of one block; ``parent`` is the enclosing block's scope (None at the top)."""

    __slots__ = ("names", "parent")

    def __init__(self, parent: Scope | None = None) -> None:
        self.names: dict[str, Any] = {}
        self.parent = parent

    def lookup(self, name: str) -> Any:
        """The innermost binding of ``name``, or None."""
        scope: Scope | None = self
        while scope is not None:
            found = scope.names.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def bind(self, name: str, operand: Any) -> None:
        self.names[name] = operand

    def child(self) -> Scope:
        return Scope(self)
