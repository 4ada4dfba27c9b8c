"""XML text -> a tree of :class:`Element` objects that know where each tag and attribute is.

``xml.etree`` forgets columns, and a markup error that cannot point at the offending
attribute is half an error.  Expat reports the byte offset of every start tag, so each
attribute's name and value are found by scanning that tag's text; every element and
attribute then carries a :class:`dsl.ir.SourceLocation` with file, line, column and the
source line, which is all :mod:`dsl.errors` needs to draw a caret.
"""

from __future__ import annotations

import bisect
import re
import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path

from dsl.errors import MarkupError
from dsl.ir import SourceLocation

__all__ = ["Attribute", "Element", "parse_document", "parse_text"]

_ATTRIBUTE_START = re.compile(rb"([^\s=/>]+)\s*=\s*([\"'])")


@dataclass(slots=True)
class Attribute:
    """One attribute as written: its text and where its name and its value are."""

    name: str
    text: str
    location: SourceLocation
    value_location: SourceLocation
    # (bindings, substituted text, whole value): a repeated block reads the same
    # attribute once per copy, with the same bindings, so the result is kept.
    resolved: tuple[object, str, object] | None = None


@dataclass(slots=True, eq=False)
class Element:
    """One tag with its attributes (in document order) and its child tags."""

    tag: str
    location: SourceLocation
    attributes: dict[str, Attribute] = field(default_factory=dict)
    children: list[Element] = field(default_factory=list)

    def get(self, name: str) -> Attribute | None:
        return self.attributes.get(name)


class _Positions:
    """Byte offsets -> (line, column) for one file; columns count characters, not bytes.

    Linear in the file however it is laid out: a whole model on one line asks for
    thousands of columns of the same line, so each line's text is cut once, and a column
    is counted on from the previous one asked for on that line (expat reports tags in
    order) instead of from the line's start."""

    def __init__(self, file: str, source: bytes) -> None:
        self.file = file
        self.source = source
        self.line_starts = [0] + [m.end() for m in re.finditer(rb"\n", source)]
        self.lines = [line.rstrip("\r") for line in source.decode("utf-8", errors="replace").split("\n")]
        self.last = (-1, 0, 0)  # (line index, byte offset, its column): where counting resumes

    def _column(self, line_index: int, offset: int) -> int:
        last_line, last_offset, last_column = self.last
        if last_line == line_index and last_offset <= offset:
            start, column = last_offset, last_column
        else:
            start, column = self.line_starts[line_index], 0
        column += len(self.source[start:offset].decode("utf-8", errors="replace"))
        self.last = (line_index, offset, column)
        return column

    def location(self, offset: int, end_offset: int | None = None) -> SourceLocation:
        line_index = bisect.bisect_right(self.line_starts, offset) - 1
        column = self._column(line_index, offset)
        end_column = None
        if end_offset is not None and bisect.bisect_right(self.line_starts, end_offset) - 1 == line_index:
            end_column = column + len(self.source[offset:end_offset].decode("utf-8", errors="replace"))
        line_text = self.lines[line_index] if line_index < len(self.lines) else ""
        return SourceLocation(self.file, line_index + 1, column, line_text, end_column)

    def at_line(self, line: int, column: int) -> SourceLocation:
        line_text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return SourceLocation(self.file, line, column, line_text)


def _attributes_of_tag(positions: _Positions, tag_offset: int, tag: str, pairs: list[str]) -> dict[str, Attribute]:
    """Locate each attribute of the start tag at ``tag_offset`` (names and values in order)."""
    source = positions.source
    cursor = tag_offset + 1 + len(tag.encode("utf-8"))
    found: dict[str, Attribute] = {}
    for index in range(0, len(pairs), 2):
        name, text = pairs[index], pairs[index + 1]
        match = _ATTRIBUTE_START.search(source, cursor)
        if match is None:  # cannot happen for text expat accepted; fall back to the tag itself
            here = positions.location(tag_offset)
            found[name] = Attribute(name, text, here, here)
            continue
        value_start = match.end()
        value_end = source.find(match.group(2), value_start)
        value_end = value_end if value_end >= 0 else value_start
        found[name] = Attribute(
            name,
            text,
            positions.location(match.start(1), match.end(1)),
            positions.location(value_start, value_end),
        )
        cursor = value_end + 1
    return found


def parse_text(source: bytes | str, file: str) -> Element:
    """Parse markup text into an :class:`Element` tree; malformed XML raises MarkupError.

    >>> root = parse_text('<model script-version="0.0.1"><block title="b"/></model>', "m.agr")
    >>> root.tag, root.children[0].attributes["title"].text, str(root.children[0].location)
    ('model', 'b', 'm.agr:1:32')
    """
    raw = source.encode("utf-8") if isinstance(source, str) else source
    positions = _Positions(file, raw)
    parser = xml.parsers.expat.ParserCreate()
    parser.ordered_attributes = True
    stack: list[Element] = []
    roots: list[Element] = []

    def start(tag: str, pairs: list[str]) -> None:
        offset = parser.CurrentByteIndex
        element = Element(tag, positions.location(offset + 1, offset + 1 + len(tag.encode("utf-8"))))
        element.attributes = _attributes_of_tag(positions, offset, tag, pairs)
        (stack[-1].children if stack else roots).append(element)
        stack.append(element)

    def end(tag: str) -> None:
        stack.pop()

    def text(content: str) -> None:
        if content.strip():
            leading = content[: len(content) - len(content.lstrip())].encode("utf-8")
            where = positions.location(parser.CurrentByteIndex + len(leading))
            raise MarkupError(
                f"text {content.strip()[:30]!r} is not allowed in markup",
                where,
                hint="everything is said with tags and attributes; wrap comments in <!-- -->",
            )

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    try:
        parser.Parse(raw, True)
    except xml.parsers.expat.ExpatError as error:
        message = xml.parsers.expat.ErrorString(error.code)
        raise MarkupError(
            f"malformed XML: {message}",
            positions.at_line(error.lineno, error.offset),
            hint="the architecture file must be well-formed XML: quote every attribute, close every tag",
        ) from None
    if not roots:
        raise MarkupError("the file holds no tags", positions.at_line(1, 0), hint="wrap the model in <model>")
    return roots[0]


def parse_document(path: str | Path, shown_name: str | None = None) -> Element:
    """Read and parse one markup file; ``shown_name`` is the file name errors print."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise MarkupError(f"cannot read {path}: {error.strerror}", hint="check the path") from None
    return parse_text(raw, shown_name or str(path))
