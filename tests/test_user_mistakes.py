"""The five mistakes everyone makes first, and the whole report each one gets.

Each test writes the mistake in a module file of its own (as a user's code is), runs it
the way a user would (export, or call on arrays), and asserts the complete message
(location, source line, caret span, hint; for a shape mismatch the disagreeing
dimensions) and that the traceback ends in the user's code, not in onnxquill's.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from dsl.errors import DslError, DslSyntaxError, EagerError, OpAttributeError, OpCallError, UnsupportedSyntaxError
from dsl.tracebacks import FULL_TRACEBACK_VARIABLE

MISTAKES = '''\
from dsl import FLOAT, script
from dsl import opset18 as op


@script()
def wrong_attribute(x: FLOAT["N"]) -> FLOAT["N"]:
    return op.LeakyRelu(x, alpah=0.1)


@script()
def wrong_input_count(x: FLOAT["N"], w: FLOAT["N"]) -> FLOAT["N"]:
    return op.Relu(x, w)


@script()
def projection(x: FLOAT["B", "S", 16], w: FLOAT[8, 8]) -> FLOAT["B", "S", 8]:
    y = x @ w
    return op.Relu(y)


@script()
def comprehension(x: FLOAT["N"]) -> FLOAT["N"]:
    parts = [op.Relu(v) for v in x]
    return op.Concat(*parts, axis=0)


@script()
def missing_return(x: FLOAT["N"]) -> FLOAT["N"]:
    y = op.Relu(x)
'''


@pytest.fixture()
def mistakes(tmp_path: Path) -> ModuleType:
    path = tmp_path / "mistakes.py"
    path.write_text(MISTAKES)
    spec = importlib.util.spec_from_file_location(f"user_mistakes_{id(path)}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _report(error: DslError, path: str) -> str:
    return str(error).replace(path, "mistakes.py")


def _last_frame(error: BaseException) -> traceback.FrameSummary:
    return traceback.extract_tb(error.__traceback__)[-1]


COMPILE_MISTAKES = [
    ("wrong_attribute", OpAttributeError, """\
mistakes.py:7:28: error: LeakyRelu has no attribute 'alpah'
    return op.LeakyRelu(x, alpah=0.1)
                           ^^^^^^^^^
hint: did you mean alpha? its attributes are: alpha"""),
    ("wrong_input_count", OpCallError, """\
mistakes.py:12:12: error: Relu takes 1 input, got 2
    return op.Relu(x, w)
           ^^^^^^^^^^^^^
hint: the inputs of Relu are (X); attributes are passed by keyword"""),
    ("comprehension", UnsupportedSyntaxError, """\
mistakes.py:23:34: error: a comprehension over a tensor needs its values at run time
    parts = [op.Relu(v) for v in x]
                                 ^
hint: loop over indices, for i in range(n), and read x[i]; or use op.SequenceMap / op.Scan"""),
    ("missing_return", DslSyntaxError, """\
mistakes.py:29:5: error: missing_return does not return a value
    y = op.Relu(x)
    ^^^^^^^^^^^^^^
hint: end the function with 'return <tensor>' (every path must return)"""),
]


@pytest.mark.parametrize(("name", "kind", "report"), COMPILE_MISTAKES, ids=[c[0] for c in COMPILE_MISTAKES])
def test_compile_mistake_report_and_traceback(mistakes: ModuleType, name: str, kind: type, report: str) -> None:
    with pytest.raises(kind) as caught:
        getattr(mistakes, name).to_model_proto()
    assert _report(caught.value, mistakes.__file__) == report
    last = _last_frame(caught.value)  # (the user's call: no compiler frame after it)
    assert (last.filename, last.name) == (__file__, "test_compile_mistake_report_and_traceback")


def test_shape_mismatch_at_run_time_names_the_dimensions(mistakes: ModuleType) -> None:
    with pytest.raises(EagerError) as caught:
        mistakes.projection(np.ones((2, 5, 16), np.float32), np.ones((8, 8), np.float32))
    assert _report(caught.value, mistakes.__file__) == """\
mistakes.py:17:9: error: MatMul: x: [2, 5, 16] vs w: [8, 8]: axis -1 of x is 16, axis -2 of w is 8
    y = x @ w
        ^^^^^
hint: a @ b multiplies [..., n, k] by [..., k, m]: the last dimension of x must equal the second-to-last of w \
(transpose one with op.Transpose, or check the weight's shape)"""
    last = _last_frame(caught.value)  # (the user's own line inside their function)
    assert (last.filename, last.lineno, last.name) == (mistakes.__file__, 17, "projection")
    assert caught.value.__suppress_context__  # (onnxruntime's own exception is not printed too)


def test_every_frame_on_request(mistakes: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FULL_TRACEBACK_VARIABLE, "1")
    with pytest.raises(OpCallError) as caught:
        mistakes.wrong_input_count.to_model_proto()
    modules = {frame.filename for frame in traceback.extract_tb(caught.value.__traceback__)}
    assert any(f"{Path('dsl', 'frontend')}" in name for name in modules)  # the compiler's frames too


def test_ops_called_on_arrays_hide_library_frames_too() -> None:
    from dsl import opset18 as op

    with pytest.raises(EagerError) as caught:
        op.Add(np.ones((2, 3), np.float32), np.ones(4, np.float32))
    assert [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)] == [
        "test_ops_called_on_arrays_hide_library_frames_too"]


def test_a_bug_of_the_library_keeps_every_frame() -> None:
    """Only DslErrors lose library frames: anything else is onnxquill's bug to debug."""
    from dsl.tracebacks import hide_library_frames

    def library_like() -> None:
        raise KeyError("internal")

    with pytest.raises(KeyError) as caught:
        try:
            library_like()
        except KeyError as error:
            hide_library_frames(error)
            raise
    assert [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)][-1] == "library_like"


def test_converter_entry_points_hide_library_frames(tmp_path: Path) -> None:
    import converter
    from dsl.errors import ModelLoadError

    with pytest.raises(ModelLoadError) as caught:
        converter.to_python(str(tmp_path / "missing.onnx"))
    assert [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)] == [
        "test_converter_entry_points_hide_library_frames"]


def test_python_operators_in_an_eager_body_run_at_the_opset_the_user_imported() -> None:
    from dsl import FLOAT, INT64, opset17, script

    @script()
    def pick(x: FLOAT["N"], i: INT64) -> FLOAT[...]:
        return opset17.Relu(x)[i]

    with pytest.raises(EagerError) as caught:
        pick(np.array([1.0, 2.0], np.float32), np.array(7))
    assert caught.value.message == "Gather: index 7 is out of range for axis 0 of data: [2] (size 2)"
    import eager

    assert eager.last_backend().op == "Gather (opset 17)"  # (the kernel that refused it)


def test_eager_run_error_ends_at_the_users_call(tmp_path: Path) -> None:
    import eager

    path = tmp_path / "broken.onnx"
    path.write_bytes(b"not a model")
    with pytest.raises(DslError) as caught:
        eager.run(path, [])
    last = _last_frame(caught.value)  # (no frame of eager's runner after the user's call)
    assert (last.filename, last.name) == (__file__, "test_eager_run_error_ends_at_the_users_call")
