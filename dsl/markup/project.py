"""Finding the parts of a markup project: the architecture file, ``meta.json``, the weights.

A project is a directory holding one architecture file (``.agr`` or ``.xml``), optional
weights and an optional ``meta.json``.  Agrippa took whichever architecture file
``os.listdir`` happened to list first; here, of several files, the model is the one no
other file imports (``<block src=...>``), and two such candidates without ``index=``
are an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from dsl.errors import MarkupError
from dsl.ir import SourceLocation
from dsl.markup.document import Element, parse_document
from dsl.safe_paths import contained

__all__ = ["ProjectFiles", "locate_project", "read_meta", "ARCHITECTURE_SUFFIXES"]

ARCHITECTURE_SUFFIXES = (".agr", ".xml")
META_NAME = "meta.json"


@dataclass(slots=True, frozen=True)
class ProjectFiles:
    """The project directory and its architecture file."""

    directory: Path
    architecture: Path


def locate_project(infile: str | Path, index: str | None = None) -> ProjectFiles:
    """The project directory and architecture file for ``infile`` (a directory or a file).

    >>> locate_project("tests/data/markup/mlp").architecture.name    # doctest: +SKIP
    'mlp.agr'
    """
    path = Path(infile)
    if path.is_file():
        if index is not None and Path(index).name != path.name:
            raise MarkupError(f"index={index!r} names another file than {path}", hint="pass the project directory")
        return ProjectFiles(path.parent, path)
    if not path.is_dir():
        raise MarkupError(f"no markup project at {str(path)!r}", hint="pass a project directory or an .agr file")
    if index is not None:
        architecture = path / index
        if not architecture.is_file():
            raise MarkupError(f"index file {index!r} is not in {path}", hint="index is a file name inside the project")
        return ProjectFiles(path, architecture)
    candidates = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in ARCHITECTURE_SUFFIXES)
    if not candidates:
        raise MarkupError(
            f"{path} holds no architecture file",
            hint="a project needs one file ending in .agr or .xml",
        )
    for candidate in candidates:  # (a planted symlink to a file elsewhere is never parsed)
        contained(path, candidate, f"architecture file {candidate.name!r}")
    if len(candidates) > 1:
        roots = _not_imported(candidates)
        if len(roots) == 1:
            return ProjectFiles(path, roots[0])
        names = ", ".join(p.name for p in roots)
        raise MarkupError(
            f"{path} holds {len(roots)} architecture files that no other file imports ({names}); "
            "which one is the model?",
            hint=f"pass index={roots[0].name!r} (--index on the command line), or move the others into a folder",
        )
    return ProjectFiles(path, candidates[0])


def _not_imported(candidates: list[Path]) -> list[Path]:
    """The files no other candidate imports with ``<block src=...>``: the model is the
    one file of a project that others do not import (Agrippa's projects of several files)."""
    imported: set[Path] = set()
    for candidate in candidates:
        for element in _elements(parse_document(candidate, candidate.name)):
            source = element.get("src") if element.tag == "block" else None
            if source is not None:
                imported.add((candidate.parent / source.text.strip()).resolve())
    return [c for c in candidates if c.resolve() not in imported] or candidates


def _elements(root: Element) -> list[Element]:
    found, pending = [], [root]
    while pending:
        element = pending.pop()
        found.append(element)
        pending.extend(element.children)
    return found


def read_meta(directory: Path) -> dict[str, str]:
    """``producer`` and ``graph_name`` from ``meta.json`` if the project has one."""
    path = directory / META_NAME
    if not path.is_file():
        return {}
    contained(directory, path, META_NAME)
    text = path.read_text(encoding="utf-8")
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as error:
        lines = text.split("\n")
        line_text = lines[error.lineno - 1] if error.lineno - 1 < len(lines) else ""
        raise MarkupError(
            f"meta.json is not valid JSON: {error.msg}",
            SourceLocation(str(path), error.lineno, error.colno - 1, line_text),
        ) from None
    if not isinstance(meta, dict):
        raise MarkupError("meta.json must hold a JSON object", SourceLocation(str(path), 1, 0))
    found: dict[str, str] = {}
    for key in ("producer", "graph_name"):
        if key in meta:
            if not isinstance(meta[key], str):
                raise MarkupError(f"meta.json: {key} must be a string, got {meta[key]!r}", SourceLocation(str(path), 1, 0))
            found[key] = meta[key]
    return found
