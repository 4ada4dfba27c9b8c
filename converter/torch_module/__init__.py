"""The torch back end: IR -> a trainable ``torch.nn.Module``, and its weights back to ONNX.

:func:`build_module` turns an :class:`ir.Model` into an :class:`OnnxModule`, a
``torch.fx.GraphModule`` with one call per ONNX node: a kernel of :mod:`.kernels`
where one exists, a training-aware submodule for BatchNormalization and Dropout, a
control-flow submodule for If/Loop/Scan, the callee's body in place for a call of a
model-local function, and otherwise the eager back end on detached values.  Weights
are parameters and buffers named after their ONNX values (:mod:`.names`); :meth:`OnnxModule.to_onnx` and :func:`proto_with_weights` write them
back.  The facade :func:`converter.to_torch` reads files and protos first; this
package is never imported by ``import converter``.

>>> module = build_module(model_ir)          # doctest: +SKIP
>>> module.train(); loss = module(x).sum()   # doctest: +SKIP
>>> trained = module.to_onnx()               # doctest: +SKIP
"""

from __future__ import annotations

from converter.torch_module.module import OnnxModule, build_module
from converter.torch_module.names import onnx_name, torch_name
from converter.torch_module.weights import proto_with_weights

__all__ = ["OnnxModule", "build_module", "proto_with_weights", "onnx_name", "torch_name"]
