"""Lists that mix numbers with attributes or scalars (``[0, 0, heads, -1]``), and the
debugging calls compiling leaves out (``breakpoint()``, ``print``), in both modes."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dsl import FLOAT, INT64, script
from dsl import opset18 as op
from dsl.errors import DslTypeError
from tests.helpers import check_script, run_model

Tokens = FLOAT["B", "S", 16]


@script()
def split_heads(x: Tokens, heads: int = 4) -> FLOAT["B", "S", None, None]:
    return op.Reshape(x, [0, 0, heads, -1])


@pytest.mark.parametrize("heads", [4, 2, 8])
def test_attribute_in_a_shape_list(heads: int) -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 16)).astype(np.float32)
    check_script(split_heads, [x], x.reshape(2, 3, heads, -1), attributes={"heads": heads})


def test_attribute_list_compiles_to_one_concat_of_constants_and_the_attribute() -> None:
    model = split_heads.to_model_proto()
    assert [n.op_type for n in model.graph.node].count("Concat") == 1
    x = np.ones((1, 2, 16), np.float32)
    assert run_model(model, [x])[0].shape == (1, 2, 4, 4)  # (the default, heads=4)


@script()
def scale_rows(x: FLOAT["N", 4], factor: float = 2.0) -> FLOAT["N", 4]:
    return x * op.Reshape([1.0, factor, 1.0, factor], [1, 4])


def test_float_attribute_in_a_list() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    check_script(scale_rows, [x], x * np.array([1, 3, 1, 3], np.float32), attributes={"factor": 3.0})


@script()
def tensor_in_a_list(x: FLOAT["B", 16], n: INT64) -> FLOAT["B", None, None]:
    rows = op.Shape(x, start=0, end=1)
    return op.Reshape(x, [rows, n, -1])


@pytest.mark.parametrize("n", [np.array(4, np.int64), np.array([2], np.int64)])
def test_scalar_and_one_element_tensors_in_a_list(n: np.ndarray) -> None:
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    check_script(tensor_in_a_list, [x, n], x.reshape(2, int(n.reshape(-1)[0]), -1), eager=n.ndim == 0)


def test_a_list_of_tensors_only_is_still_refused() -> None:
    @script()
    def stacked(x: FLOAT["N"]) -> FLOAT["N"]:
        return op.ReduceSum([x, x])

    with pytest.raises(DslTypeError, match="a list of tensors is not a tensor"):
        stacked.to_model_proto()


def test_a_list_of_strings_and_numbers_is_refused() -> None:
    @script()
    def mixed(x: FLOAT["N"], k: int = 2) -> FLOAT[...]:
        return op.Reshape(x, ["two", k])

    with pytest.raises(DslTypeError, match="holds numbers, not str"):
        mixed.to_model_proto()


# ----------------------------------------------------------------- debugging calls


@script()
def debugged(x: FLOAT["N"]) -> FLOAT["N"]:
    y = op.Relu(x)
    print("relu gave", y)
    breakpoint()
    return y + 1.0


def test_compiling_does_not_run_breakpoint_or_print(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    stops: list[int] = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: stops.append(1))
    model = debugged.to_model_proto()
    assert stops == [] and capsys.readouterr().out == ""
    assert [n.op_type for n in model.graph.node if n.op_type != "Constant"] == ["Relu", "Add"]


def test_eager_runs_breakpoint_and_print(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    stops: list[int] = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: stops.append(1))
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_array_equal(np.asarray(debugged(x)), np.array([1.0, 3.0], np.float32))
    assert stops == [1]
    assert capsys.readouterr().out.startswith("relu gave ")


def test_pdb_set_trace_is_left_out_too(monkeypatch: pytest.MonkeyPatch) -> None:
    import pdb

    calls: list[int] = []

    def set_trace(*args: object, **kwargs: object) -> None:  # (pdb's, recording instead of stopping)
        calls.append(1)

    set_trace.__module__ = "pdb"
    monkeypatch.setattr(pdb, "set_trace", set_trace)

    @script()
    def traced(x: FLOAT["N"]) -> FLOAT["N"]:
        pdb.set_trace()
        return op.Relu(x)

    traced.to_model_proto()
    assert calls == []


@script()
def parts_as_a_list(x: FLOAT[6, 2]):
    return [op.Identity(part) for part in op.Split(x, num_outputs=3, axis=0)]


@script()
def parts_as_a_display(x: FLOAT[6, 2]):
    first, second = op.Split(x, num_outputs=2, axis=0)
    return [first, second]


@pytest.mark.parametrize("function", [parts_as_a_list, parts_as_a_display], ids=["comprehension", "display"])
def test_a_returned_list_of_float_tensors_is_refused_alike_eagerly_and_compiled(function) -> None:
    """(a list of float tensors is neither several outputs nor a sequence: both modes say so
    with the compiler's message, at the returned expression)"""
    with pytest.raises(DslTypeError) as compiled:
        function.to_model_proto()
    with pytest.raises(DslTypeError) as eager:
        function(np.arange(12, dtype=np.float32).reshape(6, 2))
    assert compiled.value.message.startswith("a list of tensors is not a tensor")
    assert (eager.value.message, eager.value.hint) == (compiled.value.message, compiled.value.hint)
    assert (eager.value.location.line, eager.value.location.column) == (
        compiled.value.location.line, compiled.value.location.column)
    assert eager.value.location.source_line.lstrip().startswith("return [")


@script()
def sizes_as_a_list(x: FLOAT["B", "S"]):
    return x, [op.Shape(x, start=0, end=1), op.Size(x), 7]


def test_a_returned_list_of_integer_tensors_packs_alike_eagerly_and_compiled() -> None:
    x = np.ones((3, 5), np.float32)
    _, eager = sizes_as_a_list(x)
    _, compiled = run_model(sizes_as_a_list.to_model_proto(), [x])
    np.testing.assert_array_equal(np.asarray(eager), compiled)
    np.testing.assert_array_equal(compiled, np.array([3, 15, 7], np.int64))
