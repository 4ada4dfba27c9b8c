"""Keeping a project's or a model's file references inside its own folder.

A downloaded markup project names other files (``<block src=...>``, ``meta.json``, its
weights) and an ONNX model names external data files.  Each such name is resolved
(symlinks included) and must land inside the folder of the file that names it;
anything else is refused before it is opened, so no byte of an outside file (the
environment in ``/proc/self/environ``, a password file) can reach an error message.
"""

from __future__ import annotations

import os
from pathlib import Path

from dsl.errors import UnsafePathError

__all__ = ["contained"]


def contained(root: str | os.PathLike[str], path: str | os.PathLike[str], what: str, location: object = None) -> Path:
    """``path`` resolved, if it lies inside ``root`` (resolved); else :class:`UnsafePathError`.

    ``what`` names the reference in the message (``"imported file 'x.agr'"``).

    >>> contained("/project", "/project/sub/../x.agr", "imported file")   # doctest: +SKIP
    PosixPath('/project/x.agr')
    """
    resolved_root = Path(root).resolve()
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError) as error:  # (a symlink loop)
        raise UnsafePathError(f"{what} cannot be resolved: {error.__class__.__name__}", location,
                              hint="the path runs through a loop of symlinks") from None
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise UnsafePathError(
            f"{what} lies outside the folder {str(resolved_root)!r}, so it is not read",
            location,
            hint="a project or model may only refer to files inside its own folder (symlinks are followed "
            "before this check); copy the file into the folder if you trust it",
        )
    return resolved
