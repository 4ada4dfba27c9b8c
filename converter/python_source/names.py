"""Python names for the values, weights and functions of a model.

A model's names are arbitrary text; the generated source needs valid identifiers that
are not keywords, builtins or names the generated module uses itself, and that are
unique in their namespace.  :class:`Namespace` hands them out, as close to the model's
name as Python allows.
"""

from __future__ import annotations

import builtins
import keyword
import re
import unicodedata

from dsl import types

__all__ = ["RESERVED", "Namespace", "python_keeps", "identifier", "cleaned"]

_NOT_IDENTIFIER = re.compile(r"[^0-9a-zA-Z_]+")
# Bytes -> the same byte if it may appear in an identifier, else 0 (bytes.translate is fast).
_MARK_OTHERS = bytes(code if chr(code).isascii() and (chr(code).isalnum() or code == 95) else 0 for code in range(256))
# Names the generated module defines or imports itself.
_MODULE_NAMES = {"np", "ml_dtypes", "op", "script", "graph", "Opset", "initializer", "sparse_tensor",
                 "sparse_initializer", "load_weights", "weights", "Sequence", "Optional", "_"}
RESERVED = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins)) \
    | frozenset(types.ELEMENT_TYPES) | _MODULE_NAMES


def python_keeps(name: str) -> bool:
    """Whether ``name`` can be written as a keyword argument or attribute and read back as
    itself: an identifier, not a keyword, and (for non-ASCII) one Python's NFKC
    normalisation of identifiers leaves alone (``\ufb01`` would become ``fi``)."""
    if not name.isidentifier() or keyword.iskeyword(name):
        return False
    return name.isascii() or unicodedata.normalize("NFKC", name) == name


def identifier(name: str, fallback: str) -> str:
    """``name`` if it is an ASCII identifier, else :func:`cleaned`."""
    if name.isidentifier() and name.isascii():
        return name
    return cleaned(name, fallback)


def cleaned(name: str, fallback: str) -> str:
    """``name`` (not an ASCII identifier) made one: each run of other characters becomes "_"."""
    # Exporters' names ("gpu_0/conv1_w_0") have single separators, which bytes.translate
    # replaces several times faster; and where "/" is the only other character,
    # str.replace faster still.
    if name.isascii():
        slashed = name.replace("/", "_")
        if slashed.isidentifier() and "//" not in name:
            name = slashed.strip("_")
        else:
            marked = name.encode("ascii").translate(_MARK_OTHERS)
            if b"\0\0" in marked:
                name = _NOT_IDENTIFIER.sub("_", name).strip("_")
            else:
                name = marked.replace(b"\0", b"_").decode("ascii").strip("_")
    else:
        name = _NOT_IDENTIFIER.sub("_", name).strip("_")
    if not name:
        return fallback
    if name[0].isdigit():
        name = fallback + name
    return name


class Namespace:
    """One Python namespace: hands out valid, unused identifiers (``taken`` are used already)."""

    __slots__ = ("counters", "taken")

    def __init__(self, taken: set[str] | frozenset[str]) -> None:
        self.taken = set(taken)
        if not RESERVED <= self.taken:  # (fresh() relies on it; both callers pass supersets)
            self.taken |= RESERVED
        self.counters: dict[str, int] = {}

    def fresh(self, wanted: str, fallback: str = "v") -> str:
        """``wanted`` made a valid identifier, with ``_1``, ``_2``... until it is unused."""
        if wanted.isidentifier() and wanted.isascii():
            base = wanted
        else:
            # Exporters' "gpu_0/conv1_w_0" (what cleaned() makes of it, without the call)
            base = wanted.replace("/", "_")
            if not (base.isidentifier() and base.isascii() and base[0] != "_" and base[-1] != "_"
                    and "__" not in base):
                base = cleaned(wanted, fallback)
        taken = self.taken
        if base not in taken:  # (taken holds RESERVED: every namespace starts from it)
            taken.add(base)
            return base
        if base in RESERVED and base + "_" not in taken:
            taken.add(base + "_")
            return base + "_"
        counter = self.counters.get(base, 0)
        while True:
            counter += 1
            candidate = f"{base}_{counter}"
            if candidate not in taken:
                break
        self.counters[base] = counter
        taken.add(candidate)
        return candidate
