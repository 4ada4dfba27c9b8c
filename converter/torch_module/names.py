"""ONNX value names <-> torch attribute names, a reversible map.

torch refuses ``.`` in a parameter or buffer name (it separates submodules), an empty
name, and a name that already is an attribute of the module (``training``,
``forward``, ...).  ONNX names may hold any text.  ``%`` and ``.`` are written as
``%25`` and ``%2E`` (URL style), and a name torch would refuse for another reason gets
its first character escaped the same way, so :func:`onnx_name` undoes every case by
decoding ``%XX``.

>>> torch_name("layer1.0.conv1.weight")
'layer1%2E0%2Econv1%2Eweight'
>>> onnx_name(torch_name("layer1.0.conv1.weight"))
'layer1.0.conv1.weight'
"""

from __future__ import annotations

import re

__all__ = ["torch_name", "onnx_name"]

_ESCAPED = re.compile(r"%([0-9A-F]{2})")


def torch_name(name: str, taken: frozenset[str] = frozenset()) -> str:
    """The parameter/buffer name for the ONNX value ``name``; ``taken`` holds names the
    module class already uses, which are escaped on their first character."""
    escaped = name.replace("%", "%25").replace(".", "%2E")
    if not escaped or escaped in taken or escaped.startswith("_"):
        first = escaped[:1] or "%"
        escaped = f"%{ord(first):02X}{escaped[1:]}" if escaped else "%00"
    return escaped


def onnx_name(name: str) -> str:
    """The ONNX value name a :func:`torch_name` result stands for."""
    if name == "%00":
        return ""
    return _ESCAPED.sub(lambda match: chr(int(match.group(1), 16)), name)
