"""Profiles of eager calls (``eager.profile``) and of whole models (``eager.profile_model``).

Oracles: the wall time of the profiled calls measured here with ``time.perf_counter``
(the line rows must add up to it within 10%), the number of times each op and line runs
(known from the code), and a line made slow on purpose (a large MatMul among small ops),
which must come first.
"""

from __future__ import annotations

import inspect
import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import onnxruntime
import pytest

import eager
from dsl import FLOAT, INT64, graph, hooks, script
from dsl import opset18 as op
from dsl.errors import DslError, DslTypeError, EagerError
from dsl.source_links import LOCATION_KEY, SOURCE_KEY
from tests.runtime_probes import onnxruntime_refusals

N = 768  # a 768x768 MatMul takes milliseconds; the other ops (on 768 floats, mostly) microseconds


@script()
def scaled_tanh(x: FLOAT["N"]) -> FLOAT["N"]:
    doubled = x * 2.0
    return op.Tanh(doubled)


@script()
def block(x: FLOAT["N", "N"], v: FLOAT["N"]) -> FLOAT["N"]:
    small = op.Relu(v)
    product = op.MatMul(x, x)  # the slow line
    for _ in range(3):
        small = scaled_tanh(small)
    return small + op.Gather(product, 0, axis=0)


def _line_of(function: object, text: str) -> int:
    source, first = inspect.getsourcelines(function.python_function)  # type: ignore[attr-defined]
    return first + next(index for index, line in enumerate(source) if text in line)


def _profiled_calls(calls: int) -> tuple[eager.profile, float]:
    x = np.random.default_rng(0).random((N, N), dtype=np.float32)
    v = np.ones(N, np.float32)
    block(x, v)  # sessions built before the profile: it measures the steady state
    wall = 0.0
    with eager.profile(print_table=False) as profiled:
        for _ in range(calls):
            start = time.perf_counter()
            block(x, v)
            wall += time.perf_counter() - start
    return profiled, wall


def test_line_totals_add_up_to_the_wall_time_and_the_slow_line_comes_first() -> None:
    profiled, wall = _profiled_calls(6)
    report = profiled.report
    assert report is not None and report.runs == 6
    total = sum(row.total_s for row in report.by_line)
    assert abs(total - wall) <= 0.1 * wall, (total, wall)
    assert abs(report.wall_s - wall) <= 0.1 * wall
    slowest = report.by_line[0]
    assert slowest.line == _line_of(block, "op.MatMul(x, x)") and "MatMul" in slowest.source
    assert slowest.calls == 6 and slowest.file == block.python_function.__code__.co_filename
    assert report.by_op[0].key == "MatMul"
    assert abs(sum(row.share for row in report.by_line) - 1.0) < 1e-9


def test_calls_per_op_type_and_per_line_are_counted_as_the_code_runs() -> None:
    profiled, _ = _profiled_calls(2)
    report = profiled.report
    assert report is not None
    calls = {row.key: row.calls for row in report.by_op}
    assert calls == {"Relu": 2, "MatMul": 2, "Mul": 6, "Tanh": 6, "Gather": 2, "Add": 2}
    lines = {row.line: row for row in report.by_line if row.file == block.python_function.__code__.co_filename}
    assert lines[_line_of(block, "for _ in range(3)")].calls == 2 * 4  # three entries and the exit, per call
    assert lines[_line_of(block, "small = scaled_tanh(small)")].calls == 6
    nested = lines[_line_of(scaled_tanh, "op.Tanh(doubled)")]
    assert nested.calls == 6 and nested.source == "return op.Tanh(doubled)"
    call_rows = [row for row in report.by_line if "calling scaled_tanh" in row.source]
    assert len(call_rows) == 1 and call_rows[0].calls == 6
    for row in (*report.by_op, *report.by_line):
        assert row.mean_s == pytest.approx(row.total_s / row.calls)
    assert {"key", "calls", "total_s", "mean_s", "share", "source"} <= set(report.records("op")[0])


def test_an_op_called_outside_a_scripted_function_counts_for_its_line() -> None:
    x = np.ones(4, np.float32)
    op.Sqrt(x)
    with eager.profile(print_table=False) as profiled:
        op.Sqrt(x)
    here = sys._getframe().f_code
    report = profiled.report
    assert report is not None and [row.key for row in report.by_op] == ["Sqrt"]
    assert report.by_line[0].file == here.co_filename and "op.Sqrt(x)" in report.by_line[0].source


@script()
def branchy(x: FLOAT["N", "N"]) -> FLOAT["N", "N"]:
    @graph()
    def then_branch():
        return op.MatMul(x, x)

    @graph()
    def else_branch():
        return -x

    return op.If(op.ReduceSum(x) > 0.0, then_branch=then_branch, else_branch=else_branch)


def test_an_op_running_other_ops_counts_its_own_time_only() -> None:
    x = np.random.default_rng(3).random((N, N), dtype=np.float32)
    branchy(x)
    with eager.profile(print_table=False) as profiled:
        for _ in range(3):
            branchy(x)
    report = profiled.report
    assert report is not None
    rows = {row.key: row for row in report.by_op}
    assert rows["If"].calls == 3 and rows["MatMul"].calls == 3 and "Neg" not in rows
    assert rows["If"].total_s < rows["MatMul"].total_s  # the branch's MatMul is not the If's own time
    assert sum(row.total_s for row in report.by_op) <= sum(row.total_s for row in report.by_line)


def test_nothing_is_left_installed_after_the_block() -> None:
    hook, tracer = hooks.run_op_eagerly, sys.gettrace()
    with pytest.raises(ValueError, match="inside"):
        with eager.profile(print_table=False):
            op.Relu(np.ones(2, np.float32))
            raise ValueError("inside")
    assert hooks.run_op_eagerly is hook and sys.gettrace() is tracer
    with eager.profile(print_table=False):
        with pytest.raises(EagerError, match="already running"):
            with eager.profile(print_table=False):
                pass


def test_the_table_is_printed_with_both_sections(capsys: pytest.CaptureFixture[str]) -> None:
    with eager.profile():
        scaled_tanh(np.ones(3, np.float32))
    printed = capsys.readouterr().out
    assert "op type" in printed and "source line" in printed and "return op.Tanh(doubled)" in printed


# ------------------------------------------------------------------ profile_model

SOURCE_LINES = ["a = op.Relu(x)", "b = a @ w  # slow", "c = b + x", "y = op.Tanh(c)"]


def _linked_model() -> onnx.ModelProto:
    """A model whose nodes carry source links, as to_model_proto(source_links=True) writes them;
    the last node has none."""
    nodes = [oh.make_node("Relu", ["x"], ["a"]), oh.make_node("MatMul", ["a", "w"], ["b"]),
             oh.make_node("Add", ["b", "x"], ["c"]), oh.make_node("Tanh", ["c"], ["y"])]
    for index, (node, text) in enumerate(zip(nodes[:3], SOURCE_LINES)):
        node.metadata_props.add(key=LOCATION_KEY, value=f"models/block.py:{10 + index}:5")
        node.metadata_props.add(key=SOURCE_KEY, value=text)
    square = [N, N]
    graph = oh.make_graph(nodes, "block", [oh.make_tensor_value_info("x", 1, square),
                                           oh.make_tensor_value_info("w", 1, square)],
                          [oh.make_tensor_value_info("y", 1, square)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


def test_profile_model_maps_node_times_to_lines_and_adds_up_to_the_runs(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    x = np.random.default_rng(1).random((N, N), dtype=np.float32)
    report = eager.profile_model(_linked_model(), [x, x], runs=10, print_table=False)
    assert os.listdir(str(tmp_path)) == []  # onnxruntime's trace file is removed
    assert report.runs == 10
    total = sum(row.total_s for row in report.by_line)
    assert abs(total - report.wall_s) <= 0.1 * report.wall_s, (total, report.wall_s)
    slowest = report.by_line[0]
    assert (slowest.file, slowest.line, slowest.source) == ("models/block.py", 11, SOURCE_LINES[1])
    assert {row.key: row.calls for row in report.by_op} == {"Relu": 10, "MatMul": 10, "Add": 10, "Tanh": 10}
    keys = {row.key for row in report.by_line}
    assert {"models/block.py:10", "models/block.py:12", eager.model_profile.NO_LINK} <= keys
    tanh_time = next(row.total_s for row in report.by_op if row.key == "Tanh")
    unlinked = next(row.total_s for row in report.by_line if row.key == eager.model_profile.NO_LINK)
    assert unlinked == pytest.approx(tanh_time)


def test_profile_model_of_a_scripted_function_names_its_ops() -> None:
    x = np.random.default_rng(2).random((N, N), dtype=np.float32)
    report = eager.profile_model(block, {"x": x, "v": np.ones(N, np.float32)}, runs=3, print_table=False)
    assert report.by_op[0].key == "MatMul" and report.by_op[0].calls == 3
    assert report.notes == []
    assert report.by_line[0].line == _line_of(block, "op.MatMul(x, x)")


@script()
def looped_matmul(x: FLOAT["N", "N"], steps: INT64) -> FLOAT["N", "N"]:
    y = op.Relu(x)
    for _ in range(steps):
        y = op.MatMul(y, x)  # the Loop's body: its time is the Loop node's
    return y


def test_profile_model_counts_a_loop_body_inside_the_loop_not_twice() -> None:
    x = np.random.default_rng(3).random((N // 2, N // 2), dtype=np.float32) / N
    report = eager.profile_model(looped_matmul, [x, np.array(6, np.int64)], runs=4, print_table=False)
    total = sum(row.total_s for row in report.by_line)
    assert abs(total - report.wall_s) <= 0.1 * report.wall_s, (total, report.wall_s)
    assert {row.key: row.calls for row in report.by_op} == {"Relu": 4, "Loop": 4}
    assert report.by_line[0].line == _line_of(looped_matmul, "for _ in range(steps)")


def test_profile_model_prints_both_tables_unless_asked_not_to(capsys: pytest.CaptureFixture[str]) -> None:
    report = eager.profile_model(scaled_tanh, [np.ones(N, np.float32)], runs=2)
    printed = capsys.readouterr().out
    assert printed.strip() == report.table().strip()
    assert "op type" in printed and "source line" in printed and "return op.Tanh(doubled)" in printed


def test_profile_model_checks_its_arguments() -> None:
    with pytest.raises(DslTypeError, match="runs=0"):
        eager.profile_model(_linked_model(), [], runs=0, print_table=False)
    with pytest.raises(EagerError, match="input 'w' of the model is missing"):
        eager.profile_model(_linked_model(), [np.ones((N, N), np.float32)], runs=1, print_table=False)


def _small_model() -> onnx.ModelProto:
    """y = x @ w + b: x FLOAT[2, n] fed; w FLOAT[n, 3] fed; b an initializer listed as an input."""
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["x", "w"], ["h"]), oh.make_node("Add", ["h", "b"], ["y"])], "small",
        [oh.make_tensor_value_info("x", 1, [2, "n"]), oh.make_tensor_value_info("w", 1, ["n", 3]),
         oh.make_tensor_value_info("b", 1, [3])],
        [oh.make_tensor_value_info("y", 1, [2, 3])],
        [onnx.numpy_helper.from_array(np.ones(3, np.float32), "b")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


_X = np.ones((2, 4), np.float32)
_W = np.ones((4, 3), np.float32)
_INPUT_MISTAKES = {
    "missing": [_X],
    "surplus": [_X, _W, np.ones(3, np.float32), _X],
    "unknown name": {"x": _X, "w": _W, "z": _X},
    "element type": [_X.astype(np.float64), _W],
    "rank": [_X.reshape(8), _W],
    "fixed size": [np.ones((3, 4), np.float32), _W],
}


@pytest.mark.parametrize("mistake", list(_INPUT_MISTAKES))
def test_profile_model_checks_inputs_as_run_does(mistake: str) -> None:
    """One check for both: the same error class, message and hint, at the caller's line."""
    given = _INPUT_MISTAKES[mistake]
    with pytest.raises(DslError) as by_run:
        eager.run(_small_model(), given)
    with pytest.raises(DslError) as by_profile:
        eager.profile_model(_small_model(), given, runs=1, print_table=False)
    assert type(by_profile.value) is type(by_run.value)
    assert (by_profile.value.message, by_profile.value.hint) == (by_run.value.message, by_run.value.hint)
    assert by_profile.value.location is not None and by_profile.value.location.file == __file__
    # what onnxruntime says of the same feeds, the oracle that these are mistakes
    names = ["x", "w", "b", "fourth"]  # (onnxruntime names a surplus input by a name it lacks)
    feeds = given if isinstance(given, dict) else dict(zip(names, given))
    session = onnxruntime.InferenceSession(_small_model().SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(onnxruntime_refusals()):
        session.run(None, feeds)


def test_profile_model_binds_inputs_by_name_and_keeps_an_initializer_input() -> None:
    report = eager.profile_model(_small_model(), {"w": _W, "x": _X}, runs=2, print_table=False)
    assert report.runs == 2 and {row.key for row in report.by_op} == {"MatMul", "Add"}
