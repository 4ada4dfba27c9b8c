"""The XML reader: every tag and attribute knows its file, line, column and source line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsl.errors import MarkupError
from dsl.markup.document import parse_document, parse_text

SOURCE = """<?xml version="1.0"?>
<!-- a comment -->
<model script-version="0.0.1">
  <block title='say "hi" > there' rep="2"
         name = "é$x">
    <node op="Relu"/>
  </block>
</model>
"""


def test_locations_of_tags_and_attributes() -> None:
    root = parse_text(SOURCE, "m.agr")
    assert (root.tag, root.location.line, root.location.column) == ("model", 3, 1)
    block = root.children[0]
    assert (block.location.line, block.location.column, block.location.end_column) == (4, 3, 8)
    title = block.attributes["title"]
    assert title.text == 'say "hi" > there'
    assert (title.location.line, title.location.column) == (4, 9)
    assert (title.value_location.column, title.value_location.end_column) == (16, 32)
    rep = block.attributes["rep"]
    assert (rep.value_location.line, rep.value_location.column) == (4, 39)
    name = block.attributes["name"]  # on the next line, after spaces around '='
    assert name.text == "é$x"
    assert (name.location.line, name.location.column, name.value_location.column) == (5, 9, 17)
    assert name.location.source_line == '         name = "é$x">'
    node = block.children[0]
    assert node.attributes["op"].value_location.column == 14
    assert list(block.attributes) == ["title", "rep", "name"]


def test_entities_are_decoded() -> None:
    root = parse_text('<model a="[&quot;N&quot;, 1]" b="&lt;&amp;"/>', "m.agr")
    assert root.attributes["a"].text == '["N", 1]' and root.attributes["b"].text == "<&"


@pytest.mark.parametrize(
    ("text", "fragment", "line"),
    [
        ("<model>\n  <a>\n</model>", "mismatched tag", 3),
        ("<model a='1' a='2'/>", "duplicate attribute", 1),
        ("<model>\n<b c=1/></model>", "not well-formed", 2),
        ("", "no element found", 1),
        ("<model/>\n<model/>", "junk after document element", 2),
    ],
)
def test_malformed_xml(text: str, fragment: str, line: int) -> None:
    with pytest.raises(MarkupError, match=fragment) as caught:
        parse_text(text, "m.agr")
    assert caught.value.location.line == line


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(MarkupError, match="cannot read"):
        parse_document(tmp_path / "missing.agr")
