"""What Agrippa accepted in a project and what does not change the computed model.

Projects written the way Agrippa users write them (each with one of its tolerated
mistakes: a misspelt ``dims``, editor layout, a block exporting a name nothing
defines, an attribute that is an input in the project's opset) export by default with
a :class:`MarkupWarning` at the mistake's ``file:line:col``, compute what numpy computes,
and fail under ``strict=True`` with a :class:`MarkupError` at that same line.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from dsl.errors import MarkupError
from dsl.markup import export, to_model_proto
from dsl.markup.state import MarkupWarning
from tests.helpers import run_model

RNG = np.random.default_rng(29)

# (project text, the text on the line of the mistake, what the warning says)
PROJECTS = {
    "misspelt dims": ("""<model script-version="0.0.1">
    <import dim="[2, 3]" from="x" type="float32" />
    <block title="Lin">
        <import from="x" />
        <node title="Lin" op="MatMul">
            <input src="x" />
            <params name="W" dim="[3, 4]" />
            <output name="h" dims="[2, 4]" />
        </node>
        <export from="h" />
    </block>
    <export from="h" type="float32" />
</model>
""", 'dims="[2, 4]"', "<output> has no attribute 'dims'; ignored"),
    "editor layout": ("""<model script-version="0.0.1">
    <import dim="[2, 3]" from="x" type="float32" />
    <block title="Lin" x="140" y="60">
        <import from="x" />
        <node title="Lin" op="MatMul">
            <input src="x" />
            <params name="W" dim="[3, 4]" />
            <output name="h" dim="[2, 4]" />
        </node>
        <export from="h" />
    </block>
    <export from="h" type="float32" />
</model>
""", 'x="140"', "layout written by Agrippa's editor"),
    "export of an undefined name": ("""<model script-version="0.0.1">
    <import dim="[2, 3]" from="x" type="float32" />
    <block title="Lin">
        <import from="x" />
        <node title="Lin" op="MatMul">
            <input src="x" />
            <params name="W" dim="[3, 4]" />
            <output name="h" dim="[2, 4]" />
        </node>
        <export from="h" />
        <export from="layer_norm" />
    </block>
    <export from="h" type="float32" />
</model>
""", '<export from="layer_norm" />', "exports 'layer_norm', which nothing in it defines; ignored"),
}

REDUCE_SUM = """<model script-version="0.0.1" opset="13">
    <import dim="[2, 3]" from="x" type="float32" />
    <block title="Sum">
        <import from="x" />
        <node title="Sum" op="ReduceSum" axes="[0]" keepdims="0">
            <input src="x" />
            <output name="s" dim="[3]" />
        </node>
        <export from="s" />
    </block>
    <export from="s" type="float32" />
</model>
"""


def _project(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / re.sub(r"\W", "_", name)
    folder.mkdir()
    (folder / "model.agr").write_text(text)
    return folder


def _line_of(text: str, fragment: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if fragment in line)


@pytest.mark.parametrize("name", list(PROJECTS))
def test_a_tolerated_mistake_is_a_warning_at_its_line_and_an_error_when_strict(tmp_path: Path, name: str) -> None:
    text, fragment, message = PROJECTS[name]
    project = _project(tmp_path, name, text)
    line = _line_of(text, fragment)
    with pytest.warns(MarkupWarning, match=re.escape(message)) as record:
        model = export(project, tmp_path / "m.onnx", seed=0, write_weights=False)
    assert any(f"model.agr:{line}:" in str(warning.message) for warning in record)
    onnx.checker.check_model(model, full_check=True)
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    w = onnx.numpy_helper.to_array(model.graph.initializer[0])
    np.testing.assert_allclose(run_model(model, [x])[0], x @ w, rtol=1e-5)
    with pytest.raises(MarkupError, match=re.escape(message.removesuffix("; ignored"))) as caught:
        export(project, tmp_path / "strict.onnx", seed=0, write_weights=False, strict=True)
    assert caught.value.location is not None and caught.value.location.line == line
    assert not (tmp_path / "strict.onnx").exists()


def test_an_attribute_that_became_an_input_is_fed_as_that_input(tmp_path: Path) -> None:
    project = _project(tmp_path, "reduce", REDUCE_SUM)
    line = _line_of(REDUCE_SUM, 'axes="[0]"')
    with pytest.warns(MarkupWarning, match=r"'axes' is an input of ReduceSum in opset 13, not an attribute; "
                                           r"passed as that input") as record:
        model = to_model_proto(project, seed=0)
    assert any(f"model.agr:{line}:" in str(warning.message) for warning in record)
    onnx.checker.check_model(model, full_check=True)
    reduce = next(node for node in model.graph.node if node.op_type == "ReduceSum")
    assert len(reduce.input) == 2 and not any(a.name == "axes" for a in reduce.attribute)
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_allclose(run_model(model, [x])[0], x.sum(axis=0), rtol=1e-6)
    with pytest.raises(MarkupError, match="'axes' is an input of ReduceSum") as caught:
        to_model_proto(project, seed=0, strict=True)
    assert caught.value.location is not None and caught.value.location.line == line


def test_an_input_given_twice_is_an_error(tmp_path: Path) -> None:
    text = REDUCE_SUM.replace('<input src="x" />', '<input src="x" />\n            <input src="x" />')
    with pytest.warns(MarkupWarning, match="'axes' is an input"), \
            pytest.raises(MarkupError, match="input 'axes' is given twice"):
        to_model_proto(_project(tmp_path, "twice", text), seed=0)
