"""Wrong programs whose sizes prove a mistake: each is refused while compiling, at the
line of the call that made the node (or the return / the argument whose annotation
disagrees), with the whole message asserted; and the same program run eagerly gives the
same message, symbolic sizes replaced by the sizes it ran with (the rules are
:mod:`dsl.shape_rules`, shared by both).  ``EAGER_DIFFERS`` lists the cases eager mode
does not report the same way, and why.
"""

from __future__ import annotations

import inspect
import itertools
import linecache
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from dsl import DslError, ir
from dsl.errors import DslTypeError

HEADER = "import numpy as np\nfrom dsl import script, FLOAT, INT64, BOOL, opset18 as op\n"
_counter = itertools.count()


@dataclass(frozen=True)
class Case:
    name: str
    marker: str  # the text on the line the error must point at
    message: str
    shapes: list[tuple[int, ...]] | None  # eager input shapes (None: not run eagerly)
    body: str


# The cases eager mode cannot report the same way, and why; every other case gives the
# same message at the same line.  Eagerly every rank is known, so a program refused only
# because a rank is unknown while compiling runs (its result is checked against numpy).
EAGER_DIFFERS: dict[str, str] = {
    "shape_unpack_unknown_rank": "x.shape has the rank of the array given",
    "ndim_unknown_rank": "x.ndim is the rank of the array given",
}

CASES = [
    Case(
        'matmul_static', 'x @ W',
        'MatMul: x: [1, 3, 256] vs W: [64, 256]: axis -1 of x is 256, axis -2 of W is 64',
        [(1, 3, 256)], '''
W = np.zeros((64, 256), np.float32)
@script()
def f(x: FLOAT[1, 3, 256]) -> FLOAT[1, 3, 64]:
    return x @ W
'''),
    Case(
        'matmul_symbolic', 'x @ W',
        'MatMul: x: [B, S, 256] vs W: [64, 256]: axis -1 of x is 256, axis -2 of W is 64',
        [(2, 3, 256)], '''
W = np.zeros((64, 256), np.float32)
@script()
def f(x: FLOAT["B", "S", 256]) -> FLOAT["B", "S", 64]:
    return x @ W
'''),
    Case(
        'matmul_transposed_operand', 'op.MatMul(x, op.Transpose(wk))',
        'MatMul: x: [B, 8] vs op.Transpose(wk): [4, 8]: axis -1 of x is 8, axis -2 of op.Transpose(wk) is 4',
        [(2, 8), (8, 4)], '''
@script()
def f(x: FLOAT["B", 8], wk: FLOAT[8, 4]) -> FLOAT["B", 8]:
    return op.MatMul(x, op.Transpose(wk))
'''),
    Case(
        'matmul_batch_axes', 'a @ b',
        'MatMul: a: [2, 3, 4] vs b: [5, 4, 6]: their batch axes do not broadcast',
        [(2, 3, 4), (5, 4, 6)], '''
@script()
def f(a: FLOAT[2, 3, 4], b: FLOAT[5, 4, 6]) -> FLOAT[2, 3, 6]:
    return a @ b
'''),
    Case(
        'gemm_untransposed_weight', 'op.Gemm(x, w, bias)',
        'Gemm: x: [N, 8] vs w: [4, 8]: axis 1 of x is 8, axis 0 of w is 4 (transA=0, transB=0)',
        [(2, 8), (4, 8), (4,)], '''
@script()
def f(x: FLOAT["N", 8], w: FLOAT[4, 8], bias: FLOAT[4]) -> FLOAT["N", 4]:
    return op.Gemm(x, w, bias)
'''),
    Case(
        'gemm_transposed_wrong', 'op.Gemm(x, w, transB=1)',
        'Gemm: x: [2, 8] vs w: [4, 6]: axis 1 of x is 8, axis 1 of w is 6 (transA=0, transB=1)',
        [(2, 8), (4, 6)], '''
@script()
def f(x: FLOAT[2, 8], w: FLOAT[4, 6]) -> FLOAT[2, 4]:
    return op.Gemm(x, w, transB=1)
'''),
    Case(
        'conv_channels', 'op.Conv(x, w)',
        'Conv: x: [1, 3, 8, 8] vs w: [4, 4, 3, 3]: x has 3 channels (axis 1), w expects 4',
        [(1, 3, 8, 8), (4, 4, 3, 3)], '''
@script()
def f(x: FLOAT[1, 3, 8, 8], w: FLOAT[4, 4, 3, 3]) -> FLOAT[1, 4, 6, 6]:
    return op.Conv(x, w)
'''),
    Case(
        'conv_channels_symbolic_batch', 'op.Conv(x, w, pads=[1, 1, 1, 1])',
        'Conv: x: [N, 3, H, W] vs w: [16, 1, 3, 3]: x has 3 channels (axis 1), w expects 1',
        [(2, 3, 8, 8), (16, 1, 3, 3)], '''
@script()
def f(x: FLOAT["N", 3, "H", "W"], w: FLOAT[16, 1, 3, 3]) -> FLOAT["N", 16, "H", "W"]:
    return op.Conv(x, w, pads=[1, 1, 1, 1])
'''),
    Case(
        'conv_group', 'op.Conv(x, w, group=3)',
        'Conv: x: [1, 4, 8, 8] vs w: [6, 2, 3, 3]: x has 4 channels (axis 1), w expects 6 (2 per group x group=3)',
        [(1, 4, 8, 8), (6, 2, 3, 3)], '''
@script()
def f(x: FLOAT[1, 4, 8, 8], w: FLOAT[6, 2, 3, 3]) -> FLOAT[1, 6, 6, 6]:
    return op.Conv(x, w, group=3)
'''),
    Case(
        'conv_group_output_channels', 'op.Conv(x, w, group=2)',
        'Conv: w: [5, 2, 3, 3]: 5 output channels do not split into group=2',
        [(1, 4, 8, 8), (5, 2, 3, 3)], '''
@script()
def f(x: FLOAT[1, 4, 8, 8], w: FLOAT[5, 2, 3, 3]) -> FLOAT[1, 5, 6, 6]:
    return op.Conv(x, w, group=2)
'''),
    Case(
        'conv_transpose_channels', 'op.ConvTranspose(x, w)',
        'ConvTranspose: x: [1, 3, 8, 8] vs w: [4, 2, 3, 3]: x has 3 channels (axis 1), w expects 4',
        [(1, 3, 8, 8), (4, 2, 3, 3)], '''
@script()
def f(x: FLOAT[1, 3, 8, 8], w: FLOAT[4, 2, 3, 3]) -> FLOAT[1, 2, 10, 10]:
    return op.ConvTranspose(x, w)
'''),
    Case(
        'reshape_count', 'op.Reshape(x, [1, 4, 8, 32])',
        'Reshape: x: [1, 4, 64] has 256 elements, which cannot be reshaped to [1, 4, 8, 32] (1024 elements)',
        [(1, 4, 64)], '''
@script()
def f(x: FLOAT[1, 4, 64]) -> FLOAT[1, 4, 8, 32]:
    return op.Reshape(x, [1, 4, 8, 32])
'''),
    Case(
        'reshape_inferred_axis', 'op.Reshape(x, [4, -1])',
        'Reshape: x: [6] has 6 elements, which cannot be reshaped to [4, -1] (a multiple of 4)',
        [(6,)], '''
@script()
def f(x: FLOAT[6]) -> FLOAT[4, "M"]:
    return op.Reshape(x, [4, -1])
'''),
    Case(
        'reshape_copied_axis', 'op.Reshape(x, [0, 5, -1])',
        'Reshape: x: [2, 3, 4] has 24 elements, which cannot be reshaped to [0, 5, -1] (a multiple of 10)',
        [(2, 3, 4)], '''
@script()
def f(x: FLOAT[2, 3, 4]) -> FLOAT[2, 5, "M"]:
    return op.Reshape(x, [0, 5, -1])
'''),
    Case(
        'concat_non_axis', 'op.Concat(a, b, axis=0)',
        'Concat: a: [2, 3] vs b: [2, 4]: axis 1 is 3 in a and 4 in b (joining on axis 0)',
        [(2, 3), (2, 4)], '''
@script()
def f(a: FLOAT[2, 3], b: FLOAT[2, 4]) -> FLOAT[4, 3]:
    return op.Concat(a, b, axis=0)
'''),
    Case(
        'concat_kv_cache_heads_axis', 'op.Concat(cache, k, axis=1)',
        'Concat: cache: [1, 4, 10, 16] vs k: [1, 4, 1, 16]: axis 2 is 10 in cache and 1 in k (joining on axis 1)',
        [(1, 4, 10, 16), (1, 4, 1, 16)], '''
@script()
def f(cache: FLOAT[1, 4, 10, 16], k: FLOAT[1, 4, 1, 16]) -> FLOAT[1, 4, 11, 16]:
    return op.Concat(cache, k, axis=1)
'''),
    Case(
        'concat_ranks', 'op.Concat(a, b, axis=0)',
        'Concat: a: [2, 3] vs b: [3]: ranks 2 and 1',
        [(2, 3), (3,)], '''
@script()
def f(a: FLOAT[2, 3], b: FLOAT[3]) -> FLOAT[3, 3]:
    return op.Concat(a, b, axis=0)
'''),
    Case(
        'concat_axis_range', 'op.Concat(a, b, axis=2)',
        'Concat: axis 2 is out of range for a: [N, 3] (rank 2)',
        [(2, 3), (2, 3)], '''
@script()
def f(a: FLOAT["N", 3], b: FLOAT["N", 3]) -> FLOAT["N", 6]:
    return op.Concat(a, b, axis=2)
'''),
    Case(
        'broadcast_static', 'x + y',
        'Add: x: [4, 3] vs y: [4]: axis -1 is 3 in x and 4 in y',
        [(4, 3), (4,)], '''
@script()
def f(x: FLOAT[4, 3], y: FLOAT[4]) -> FLOAT[4, 3]:
    return x + y
'''),
    Case(
        'broadcast_symbolic', 'x * scale',
        'Mul: x: [B, 3] vs scale: [4]: axis -1 is 3 in x and 4 in scale',
        [(2, 3), (4,)], '''
@script()
def f(x: FLOAT["B", 3], scale: FLOAT[4]) -> FLOAT["B", 3]:
    return x * scale
'''),
    Case(
        'broadcast_where', 'op.Where(mask, x, y)',
        'Where: mask: [2, 3] vs y: [2]: axis -1 is 3 in mask and 2 in y',
        [(2, 3), (2, 3), (2,)], '''
@script()
def f(mask: BOOL[2, 3], x: FLOAT[2, 3], y: FLOAT[2]) -> FLOAT[2, 3]:
    return op.Where(mask, x, y)
'''),
    Case(
        'gather_axis', 'op.Gather(x, i, axis=2)',
        'Gather: axis 2 is out of range for x: [2, 3] (rank 2)',
        [(2, 3), (1,)], '''
@script()
def f(x: FLOAT[2, 3], i: INT64[1]) -> FLOAT[2, 3]:
    return op.Gather(x, i, axis=2)
'''),
    Case(
        'slice_axes', 'op.Slice(x, [0], [1], [3])',
        'Slice: axis 3 is out of range for x: [N, 3] (rank 2)',
        [(2, 3)], '''
@script()
def f(x: FLOAT["N", 3]) -> FLOAT["N", 3]:
    return op.Slice(x, [0], [1], [3])
'''),
    Case(
        'transpose_perm', 'op.Transpose(x, perm=[0, 2, 1])',
        'Transpose: perm=[0, 2, 1] is not a permutation of the 2 axes of x: [2, 3]',
        [(2, 3)], '''
@script()
def f(x: FLOAT[2, 3]) -> FLOAT[3, 2]:
    return op.Transpose(x, perm=[0, 2, 1])
'''),
    Case(
        'squeeze_non_unit', 'op.Squeeze(x, [1])',
        'Squeeze: axis 1 of x: [2, 3] has size 3, not 1',
        [(2, 3)], '''
@script()
def f(x: FLOAT[2, 3]) -> FLOAT[2]:
    return op.Squeeze(x, [1])
'''),
    Case(
        'unsqueeze_axis', 'op.Unsqueeze(x, [4])',
        'Unsqueeze: axes entry 4 is out of range for x: [2, 3] (rank 3)',
        [(2, 3)], '''
@script()
def f(x: FLOAT[2, 3]) -> FLOAT[2, 3, 1]:
    return op.Unsqueeze(x, [4])
'''),
    Case(
        'reduce_axes', 'op.ReduceSum(x, [2])',
        'ReduceSum: axis 2 is out of range for x: [N, 3] (rank 2)',
        [(2, 3)], '''
@script()
def f(x: FLOAT["N", 3]) -> FLOAT["N", 1]:
    return op.ReduceSum(x, [2])
'''),
    Case(
        'expand_target', 'op.Expand(x, [2, 4])',
        'Expand: x: [2, 3] cannot be expanded to [2, 4]',
        [(2, 3)], '''
@script()
def f(x: FLOAT[2, 3]) -> FLOAT[2, 4]:
    return op.Expand(x, [2, 4])
'''),
    Case(
        'constant_of_shape_scalar_value', 'op.ConstantOfShape(shape, value=1.0)',
        'ConstantOfShape: value must be a 1-D tensor of one element, got a 0-D tensor of shape []',
        [(2,)], '''
@script()
def f(shape: INT64[2]) -> FLOAT["A", "B"]:
    return op.ConstantOfShape(shape, value=1.0)
'''),
    Case(
        'return_annotation_sizes', 'return y',
        'output 0 (y) is FLOAT[3, 2] but the annotation says FLOAT[2, 3]: axis 0 is 3, not 2',
        [(3, 2)], '''
@script()
def f(x: FLOAT[3, 2]) -> FLOAT[2, 3]:
    y = op.Relu(x)
    return y
'''),
    Case(
        'return_annotation_rank', 'return op.ReduceSum(x, [1], keepdims=0)',
        'output 0 is FLOAT[3] but the annotation says FLOAT[3, 1]: rank 1, not 2',
        [(3, 2)], '''
@script()
def f(x: FLOAT[3, 2]) -> FLOAT[3, 1]:
    return op.ReduceSum(x, [1], keepdims=0)
'''),
    Case(
        'return_after_matmul', 'return x @ w',
        'output 0 is FLOAT[N, 5] but the annotation says FLOAT[N, 4]: axis 1 is 5, not 4',
        [(2, 3), (3, 5)], '''
@script()
def f(x: FLOAT["N", 3], w: FLOAT[3, 5]) -> FLOAT["N", 4]:
    return x @ w
'''),
    Case(
        'call_argument_size', 'project(x)',
        "input 'v' of project is FLOAT[2, 3] but the annotation says FLOAT[N, 4]: axis 1 is 3, not 4",
        [(2, 3)], '''
@script()
def project(v: FLOAT["N", 4]) -> FLOAT["N", 4]:
    return op.Relu(v)
@script()
def f(x: FLOAT[2, 3]) -> FLOAT[2, 4]:
    return project(x)
'''),
    Case(
        'call_argument_elem', 'project(i)',
        "input 'v' of project is INT64 but the annotation says FLOAT",
        [(2, 4)], '''
@script()
def project(v: FLOAT["N", 4]) -> FLOAT["N", 4]:
    return op.Relu(v)
@script()
def f(i: INT64[2, 4]) -> FLOAT[2, 4]:
    return project(i)
'''),
    Case(
        'inside_called_function', 'v @ W',
        'MatMul: v: [N, 256] vs W: [64, 256]: axis -1 of v is 256, axis -2 of W is 64',
        [(2, 256)], '''
W = np.zeros((64, 256), np.float32)
@script()
def project(v: FLOAT["N", 256]) -> FLOAT["N", 64]:
    return v @ W
@script()
def f(x: FLOAT["N", 256]) -> FLOAT["N", 64]:
    return project(x)
'''),
    Case(
        'inside_if_branch', 'x @ W',
        'MatMul: x: [N, 256] vs W: [64, 256]: axis -1 of x is 256, axis -2 of W is 64',
        [(2, 256), ()], '''
W = np.zeros((64, 256), np.float32)
@script()
def f(x: FLOAT["N", 256], flag: BOOL) -> FLOAT["N", 256]:
    if flag:
        y = x @ W
    else:
        y = x
    return y
'''),
    Case(
        'inside_loop_body', 'op.Concat(k, v, axis=0)',
        'Concat: k: [2, 3] vs v: [2, 4]: axis 1 is 3 in k and 4 in v (joining on axis 0)',
        [(2, 3), (2, 4), ()], '''
@script()
def f(k: FLOAT[2, 3], v: FLOAT[2, 4], n: INT64) -> FLOAT[4, 3]:
    acc = k
    for i in range(n):
        acc = acc + op.Concat(k, v, axis=0)
    return acc
'''),
    Case(
        'inside_loop_body_broadcast', 'x * scale',
        'Mul: x: [B, 3] vs scale: [5]: axis -1 is 3 in x and 5 in scale',
        [(2, 3), (5,), ()], '''
@script()
def f(x: FLOAT["B", 3], scale: FLOAT[5], n: INT64) -> FLOAT["B", 3]:
    h = x
    for i in range(n):
        h = h + op.Relu(x * scale)
    return h
'''),
    Case(
        'inside_while_loop', 'op.Reshape(x, [5, -1])',
        'Reshape: x: [2, 3] has 6 elements, which cannot be reshaped to [5, -1] (a multiple of 5)',
        [(2, 3), ()], '''
@script()
def f(x: FLOAT[2, 3], limit: FLOAT) -> FLOAT[2, 3]:
    h = x
    while op.ReduceSum(h) > limit:
        h = h + op.Reshape(x, [5, -1])
    return h
'''),
    Case(
        'loop_carried_matmul', 'h = op.Relu(h @ w)',
        'MatMul: h: [B, 8] vs w: [4, 8]: axis -1 of h is 8, axis -2 of w is 4',
        [(2, 8), (4, 8), ()], '''
@script()
def f(x: FLOAT["B", 8], w: FLOAT[4, 8], n: INT64) -> FLOAT["B", 8]:
    h = x
    for i in range(n):
        h = op.Relu(h @ w)
    return h
'''),
    Case(
        'loop_carried_after_first_use', 'y = h @ w',
        'MatMul: h: [B, 8] vs w: [6, 8]: axis -1 of h is 8, axis -2 of w is 6',
        [(2, 8), (6, 8), ()], '''
@script()
def f(x: FLOAT["B", 8], w: FLOAT[6, 8], n: INT64) -> FLOAT["B", 8]:
    h = x
    for i in range(2, n + 2):
        h = op.Tanh(h) * 2.0
        y = h @ w
        h = h + op.ReduceSum(y, [1])
    return h
'''),
    Case(
        'loop_carried_growing_axis', 'op.Concat(acc, x, axis=1)',
        'Concat: acc: [2, 3] vs x: [3, 3]: axis 0 is 2 in acc and 3 in x (joining on axis 1)',
        [(3, 3), ()], '''
@script()
def f(x: FLOAT[3, 3], n: INT64) -> FLOAT["M", 3]:
    acc = x[0:2]
    for i in range(n):
        acc = op.Concat(acc, x, axis=1)
    return acc
'''),
    Case(
        'while_loop_carried', 'h = op.Reshape(h, [5, -1])',
        'Reshape: h: [2, 3] has 6 elements, which cannot be reshaped to [5, -1] (a multiple of 5)',
        [(2, 3), ()], '''
@script()
def f(x: FLOAT[2, 3], limit: FLOAT) -> FLOAT[2, 3]:
    h = x
    while op.ReduceSum(h) > limit:
        h = op.Reshape(h, [5, -1])
    return h
'''),
    Case(
        'while_loop_carried_concat', 'g = op.MatMul(h, w)',
        'MatMul: h: [4, 4] vs w: [3, 2]: axis -1 of h is 4, axis -2 of w is 3',
        [(2, 4), (3, 2), ()], '''
@script()
def f(x: FLOAT[2, 4], w: FLOAT[3, 2], limit: FLOAT) -> FLOAT["M", 4]:
    h = x
    while op.ReduceSum(h) > limit:
        h = op.Concat(h, x, axis=0)
        g = op.MatMul(h, w)
    return h
'''),
    Case(
        'after_loop_carried', 'return h @ v',
        'MatMul: h: [B, 8] vs v: [4, 2]: axis -1 of h is 8, axis -2 of v is 4',
        [(2, 8), (8, 8), (4, 2), ()], '''
@script()
def f(x: FLOAT["B", 8], w: FLOAT[8, 8], v: FLOAT[4, 2], n: INT64) -> FLOAT["B", 2]:
    h = x
    for i in range(n):
        h = op.Relu(h @ w)
    return h @ v
'''),
    Case(
        'shape_unpack_unknown_rank', 'b, s = x.shape',
        'the rank of x is not known here, so its shape cannot be unpacked',
        [(2, 3)], '''
@script()
def f(x: FLOAT[...]) -> FLOAT[...]:
    b, s = x.shape
    return op.Reshape(x, [b, s])
'''),
    Case(
        'ndim_unknown_rank', 'x.ndim',
        'the rank of x is not known here',
        [(2, 3)], '''
@script()
def f(x: FLOAT[...]) -> FLOAT[...]:
    return x * x.ndim
'''),
]


def _define(body: str) -> tuple[Any, str, list[str]]:
    filename = f"<shape-case-{next(_counter)}>"
    text = HEADER + body
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(text, filename, "exec", dont_inherit=True), namespace)
    return namespace["f"], filename, text.splitlines()


def _marker_line(lines: list[str], marker: str) -> int:
    """The 1-based line of the first statement (not a def) holding ``marker``."""
    return next(i for i, line in enumerate(lines) if marker in line and not line.startswith("def ")) + 1


def _inputs(function: Any, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Ones of each parameter's element type (loops run once, conditions hold)."""
    arrays = []
    for parameter, shape in zip(inspect.signature(function.python_function).parameters.values(), shapes):
        annotation = parameter.annotation
        elem = annotation.elem_type if isinstance(annotation, ir.TensorType) else annotation.enum  # (BOOL: a scalar)
        dtype = {1: np.float32, 7: np.int64, 9: np.bool_}[elem]
        arrays.append(np.ones(shape, dtype))
    return arrays


def _sizes(function: Any, shapes: list[tuple[int, ...]]) -> dict[str, int]:
    """Each symbolic size's value in the eager run (``B`` -> 2)."""
    sizes: dict[str, int] = {}
    for parameter, shape in zip(inspect.signature(function.python_function).parameters.values(), shapes):
        declared = parameter.annotation
        if isinstance(declared, ir.TensorType) and declared.shape is not None:
            for name, size in zip(declared.shape, shape):
                if isinstance(name, str):
                    sizes[name] = size
    return sizes


def _with_sizes(message: str, sizes: dict[str, int]) -> str:
    """The compiled message as eager mode words it: each shape of a value with its symbolic
    sizes replaced by the sizes the run gave them; an annotation is quoted as written."""
    def substitute(match: re.Match[str]) -> str:
        if re.search(r"the annotation says [A-Z0-9]+$", message[:match.start()]):
            return match.group(0)
        dims = [str(sizes.get(d, d)) for d in match.group(1).split(", ")]
        return "[" + ", ".join(dims) + "]"

    return re.sub(r"\[([^\[\]]*)\]", substitute, message)


def test_there_are_enough_wrong_programs() -> None:
    assert len(CASES) >= 30 and len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_compiling_refuses_at_the_line_with_the_whole_message(case: Case) -> None:
    function, filename, lines = _define(case.body)
    with pytest.raises(DslTypeError) as caught:
        function.to_model_proto()
    error = caught.value
    assert error.message == case.message
    assert error.location.file == filename
    assert error.location.line == _marker_line(lines, case.marker)
    rendered = str(error)
    assert lines[error.location.line - 1].strip() in rendered and "^" in rendered
    assert error.hint and len(error.hint) > 20


@pytest.mark.parametrize("case", [c for c in CASES if c.shapes is not None], ids=lambda c: c.name)
def test_eager_gives_the_same_message_at_the_same_line(case: Case) -> None:
    function, _, lines = _define(case.body)
    assert case.shapes is not None
    inputs = _inputs(function, case.shapes)
    if case.name in EAGER_DIFFERS:
        x = inputs[0]
        oracle = {"shape_unpack_unknown_rank": x, "ndim_unknown_rank": x * x.ndim}[case.name]
        np.testing.assert_array_equal(function(*inputs), oracle)
        return
    with pytest.raises(DslError) as caught:
        function(*inputs)
    error = caught.value
    expected = _with_sizes(case.message, _sizes(function, case.shapes))
    assert error.message == expected
    assert error.location.line == _marker_line(lines, case.marker)


def test_onnx_shape_inference_refusal_is_an_error_at_the_line() -> None:
    """An op without a static rule (TopK) is inferred by ONNX itself once ranks are known."""
    function, _, lines = _define("""
@script()
def f(x: FLOAT["B", 5], k: INT64[1]) -> FLOAT["B", "K"]:
    values, indices = op.TopK(x, k, axis=3)
    return values
""")
    with pytest.raises(DslTypeError) as caught:
        function.to_model_proto()
    assert caught.value.message == "TopK: Invalid value for attribute axis"
    assert caught.value.location.line == _marker_line(lines, "op.TopK(x, k, axis=3)")


def test_eager_points_at_the_argument_with_the_compiled_hint() -> None:
    """The argument's own columns and the hint, as compiled."""
    function, _, _ = _define("""
@script()
def project(a: FLOAT[2, 4], v: FLOAT["N", 4]) -> FLOAT["N", 4]:
    return op.Relu(v)
@script()
def f(x: FLOAT[2, 3], w: FLOAT[2, 4]) -> FLOAT[2, 4]:
    return project(w, v=x)
""")
    x, w = np.ones((2, 3), np.float32), np.ones((2, 4), np.float32)
    with pytest.raises(DslError) as compiled:
        function.to_model_proto()
    with pytest.raises(DslError) as eager:
        function(x, w)
    assert eager.value.message == compiled.value.message == (
        "input 'v' of project is FLOAT[2, 3] but the annotation says FLOAT[N, 4]: axis 1 is 3, not 4")
    assert (eager.value.location.line, eager.value.location.column) == (
        compiled.value.location.line, compiled.value.location.column)
    assert eager.value.hint == compiled.value.hint


def test_eager_checks_only_what_compiled_code_checks() -> None:
    """A symbolic size in an annotation is any size, per axis (not bound across axes nor
    to the inputs' sizes), in both modes."""
    function, _, _ = _define("""
@script()
def twice(v: FLOAT["N"]) -> FLOAT["N"]:
    return op.Concat(v, v, axis=0)
@script()
def f(x: FLOAT["N", "N"]) -> FLOAT["N"]:
    return twice(op.ReduceSum(x, [1], keepdims=0))
""")
    function.to_model_proto()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(function(x), np.concatenate([x.sum(1), x.sum(1)]))


def test_eager_result_element_type_as_compiled() -> None:
    function, _, lines = _define("""
@script()
def f(x: INT64[2]) -> FLOAT[2]:
    y = op.Neg(x)
    return y
""")
    with pytest.raises(DslError) as compiled:
        function.to_model_proto()
    with pytest.raises(DslError) as eager:
        function(np.ones(2, np.int64))
    assert eager.value.message == compiled.value.message == "output 0 is INT64 but the annotation says FLOAT"
    assert eager.value.location.line == compiled.value.location.line == _marker_line(lines, "return y")


def test_loop_carried_value_whose_shape_changes_is_not_refused() -> None:
    """Only the sizes a body gives back unchanged are assumed inside it: an accumulator
    growing on axis 0 compiles to a valid model that computes what numpy does."""
    import onnx
    import onnxruntime

    function, _, _ = _define("""
@script()
def f(x: FLOAT[2, 3], n: INT64) -> FLOAT[3, 2, 3]:
    acc = x
    h = x
    for i in range(n):
        acc = op.Concat(acc, h @ op.Transpose(op.Transpose(op.Identity(x)) @ x), axis=0)
        h = h * 2.0
    return op.Reshape(acc, [3, 2, 3])
""")
    model = function.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": x, "n": np.array(2, np.int64)})[0]
    gram = x.T @ x
    expected = np.concatenate([x, x @ gram.T, (2 * x) @ gram.T]).reshape(3, 2, 3)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    np.testing.assert_allclose(function(x, np.array(2, np.int64)), expected, rtol=1e-5)
