"""The node metadata that links a written ONNX node back to the source text it came from.

A node compiled from ``@script`` Python or from markup carries a :class:`ir.SourceLocation`;
when a model is written with source links, each such node gets two ``metadata_props``
entries, read by the graph viewer, by ``to_python`` (a comment above the statement) and by
profilers that map node times back to lines:

* ``onnxquill.location``: ``"<file>:<line>:<column>"``, the file as the location holds it,
  the line 1-based and the column 1-based (as an editor and :class:`ir.SourceLocation`'s
  ``str`` show it);
* ``onnxquill.source``: the source line, stripped.

This module is the one writer and reader of those two keys.

>>> from dsl import ir
>>> props = link_props(ir.SourceLocation("model.py", 12, 4, "    y = op.Relu(x)"))
>>> props[LOCATION_KEY], props[SOURCE_KEY]
('model.py:12:5', 'y = op.Relu(x)')
>>> read_link(props)
SourceLink(file='model.py', line=12, column=5, source='y = op.Relu(x)')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dsl import ir

__all__ = ["LOCATION_KEY", "SOURCE_KEY", "LINK_KEYS", "SourceLink", "link_props", "read_link"]

LOCATION_KEY = "onnxquill.location"
SOURCE_KEY = "onnxquill.source"
LINK_KEYS = (LOCATION_KEY, SOURCE_KEY)


@dataclass(frozen=True, slots=True)
class SourceLink:
    """A source link read back from a node's metadata: ``column`` is 1-based, as written.

    >>> SourceLink("model.py", 3, 5, "y = op.Relu(x)").where
    'model.py:3:5'
    """

    file: str
    line: int
    column: int
    source: str

    @property
    def where(self) -> str:
        """``file:line:column``, as the metadata holds it."""
        return f"{self.file}:{self.line}:{self.column}"


def link_props(location: ir.SourceLocation) -> dict[str, str]:
    """The two metadata entries that link a node to ``location``.

    >>> link_props(ir.SourceLocation("m.xml", 3, 0, "  <Relu/>"))
    {'onnxquill.location': 'm.xml:3:1', 'onnxquill.source': '<Relu/>'}
    """
    return {LOCATION_KEY: str(location), SOURCE_KEY: location.source_line.strip()}


def read_link(props: Mapping[str, str] | None) -> SourceLink | None:
    """The source link held in a node's metadata (a dict, or the ``metadata_props`` of a
    NodeProto as ``{entry.key: entry.value}``), or None where it holds none or a malformed
    one (metadata is untrusted text: a file's path may itself hold colons, so the line and
    column are read from the right).

    >>> read_link({"onnxquill.location": "C:/a.py:7:1"}).line
    7
    >>> read_link({"onnxquill.location": "nonsense"}) is None
    True
    """
    if not props:
        return None
    where = props.get(LOCATION_KEY)
    if not where:
        return None
    file, _, rest = where.rpartition(":")
    file, _, line_text = file.rpartition(":")
    if not file or not line_text.isdigit() or not rest.isdigit():
        return None
    return SourceLink(file, int(line_text), int(rest), props.get(SOURCE_KEY, ""))
