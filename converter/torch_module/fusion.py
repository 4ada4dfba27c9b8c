"""Rewrites of a built fx graph that torch runs faster, with the same ONNX results.

Exporters write ``torch.nn.Linear`` as ``MatMul(x, Transpose(W))`` then ``Add(b, .)``:
two kernels, a full pass over the product to add the bias, and the same again in the
backward pass.  When the product is read by the Add alone, the pair becomes one call
of :func:`.kernels.linear.matmul_add` (``addmm`` for a matrix and a bias vector; the
two separate ops otherwise).  Only nodes whose value nothing else reads are fused, so
every ONNX value a reader can see keeps its node.
"""

from __future__ import annotations

import torch.fx

from converter.torch_module.kernels import elementwise, linear

__all__ = ["fuse_matmul_add"]


def fuse_matmul_add(graph: torch.fx.Graph) -> None:
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not elementwise.add or node.kwargs or len(node.args) != 2:
            continue
        for position in (0, 1):
            product = node.args[position]
            if (isinstance(product, torch.fx.Node) and product.op == "call_function"
                    and product.target is linear.matmul and len(product.users) == 1 and not product.kwargs):
                bias = node.args[1 - position]
                node.target = linear.matmul_add
                node.args = (*product.args, bias)
                graph.erase_node(product)
                break
