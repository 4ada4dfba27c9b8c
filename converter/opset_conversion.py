"""An ONNX model converted to another ai.onnx opset before it is read into IR.

``onnx.version_converter`` does the work; this module gives its failures a
``ConversionError`` that names the op it stopped at, for every caller that puts a model
someone else wrote beside one of another opset (``converter.merge``/``split``/``join``,
``dsl.load``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsl.errors import ConversionError

if TYPE_CHECKING:
    import onnx

__all__ = ["onnx_opset", "convert_opset"]


def onnx_opset(proto: onnx.ModelProto) -> int:
    """The ai.onnx opset ``proto`` imports (0 when it imports none)."""
    found: int | None = None
    for opset in proto.opset_import:  # (a loop, not max() over a generator: composition asks on every call)
        if opset.domain in ("", "ai.onnx"):
            version = int(opset.version)
            if found is None or version > found:
                found = version
    return 0 if found is None else found


def convert_opset(proto: onnx.ModelProto, version: int, source: str, *, what: str = "", hint: str) -> onnx.ModelProto:
    """``proto`` converted to ai.onnx ``version``; a failure is a ConversionError naming the op.

    ``source`` (a path or a label) and ``what`` (the part converted, if not the model)
    say what failed; ``hint`` says what the caller can do instead.

    >>> converted = convert_opset(model, 18, "net.onnx", hint="convert it by hand")   # doctest: +SKIP
    """
    import onnx.version_converter

    try:
        return onnx.version_converter.convert_version(proto, version)
    except Exception as error:  # the converter raises RuntimeError/ValueError and C++ errors alike
        text = str(error)
        ops = sorted({n.op_type for n in proto.graph.node if n.op_type and n.op_type in text})
        which = f"the op {', '.join(ops)}" if ops else "an op"
        part = f" {what}" if what else ""
        raise ConversionError(
            f"{source}: cannot convert{part} from ai.onnx opset {onnx_opset(proto)} to {version}: {which} failed ({text})",
            hint=hint,
        ) from None
