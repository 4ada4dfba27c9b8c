"""Source links: every node written from ``@script`` or markup names the line it came from."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from hypothesis import given
from hypothesis import strategies as st

from dsl import FLOAT, ir, script
from dsl import opset18 as op
from dsl.source_links import LOCATION_KEY, SOURCE_KEY, link_props, read_link
from tests.helpers import run_model

DATA = Path(__file__).parent / "data" / "markup"
Vec = FLOAT["N"]


@script()
def clipped(x: Vec) -> Vec:
    doubled = x * 2.0
    if op.ReduceSum(doubled) > 0.0:
        y = op.Relu(doubled)
    else:
        y = op.Neg(doubled)
    return y


def _links(graph: onnx.GraphProto) -> list[tuple[onnx.NodeProto, dict[str, str]]]:
    found = []
    for node in graph.node:
        found.append((node, {p.key: p.value for p in node.metadata_props}))
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found += _links(attr.g)
    return found


def test_every_scripted_node_names_its_own_line() -> None:
    lines, first = inspect.getsourcelines(clipped.python_function)
    model = clipped.to_model_proto(source_links=True)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version >= 10
    found = _links(model.graph)
    assert {node.op_type for node, _ in found} >= {"Mul", "If", "Relu", "Neg", "ReduceSum"}
    for node, props in found:
        link = read_link(props)
        assert link is not None, node.op_type
        assert Path(link.file).resolve() == Path(__file__).resolve()
        assert link.source == lines[link.line - first].strip()
        assert link.column - 1 < len(lines[link.line - first])
    relu = next(read_link(props) for node, props in found if node.op_type == "Relu")
    assert relu is not None and relu.source == "y = op.Relu(doubled)"
    for x in (np.array([1.0, -3.0, 0.5], np.float32), np.array([1.0, -0.5, 2.0], np.float32)):
        expected = np.maximum(2 * x, 0) if (2 * x).sum() > 0 else -2 * x
        np.testing.assert_allclose(run_model(model, [x])[0], expected)


def test_off_by_default_and_the_ir_is_left_as_it_was() -> None:
    plain = clipped.to_model_proto()
    assert plain.ir_version < 10
    assert not any(props for _, props in _links(plain.graph))
    clipped.to_model_proto(source_links=True)
    assert all(node.metadata_props is None for node, _ in ir.walk(clipped.function.graph))
    assert clipped.to_model_proto().SerializeToString() == plain.SerializeToString()


def test_links_keep_other_node_metadata() -> None:
    node = clipped.function.graph.nodes[0]
    node.metadata_props = {"module": "head"}
    try:
        props = {p.key: p.value for p in clipped.to_model_proto(source_links=True).graph.node[0].metadata_props}
    finally:
        node.metadata_props = None
    assert props["module"] == "head" and LOCATION_KEY in props


def test_markup_nodes_name_their_xml_line(tmp_path: Path) -> None:
    from converter.to_onnx import model_to_proto
    from dsl.markup import to_model

    project = tmp_path / "ffn_rep"
    shutil.copytree(DATA / "ffn_rep", project)
    model = model_to_proto(to_model(project, bindings={"n": 3, "layers": 2}, seed=7), source_links=True)
    onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    text = (project / "ffn.agr").read_text().splitlines()
    links = [read_link(props) for _, props in _links(model.graph)]
    assert links and all(link is not None for link in links)
    for link in links:
        assert link is not None and Path(link.file).name == "ffn.agr"
        assert link.source == text[link.line - 1].strip()
    assert any('op="Relu"' in link.source for link in links if link is not None)


@given(
    file=st.text(min_size=1).filter(lambda text: text.strip() == text and text),
    line=st.integers(1, 10**6),
    column=st.integers(0, 10**4),
    source=st.text().map(str.strip),
)
def test_written_links_read_back(file: str, line: int, column: int, source: str) -> None:
    props = link_props(ir.SourceLocation(file, line, column, f"  {source}  "))
    assert read_link(props) == read_link(dict(props))
    link = read_link(props)
    assert link is not None
    assert (link.file, link.line, link.column, link.source) == (file, line, column + 1, source)
    assert props[SOURCE_KEY] == source


def test_malformed_links_read_as_none() -> None:
    for where in ("", "a.py", "a.py:x:1", "a.py:1:", ":1:2", "a.py:1:-2"):
        assert read_link({LOCATION_KEY: where}) is None, where
    assert read_link(None) is None and read_link({}) is None


def test_to_python_comments_each_statement_with_its_origin() -> None:
    import converter

    source = converter.to_python(clipped.to_model_proto(source_links=True))
    own_lines = Path(__file__).read_text().splitlines()
    comments = [line.strip() for line in source.splitlines() if line.strip().startswith("# from ")]
    assert len(comments) >= 4
    for comment in comments:
        where, _, text = comment[len("# from "):].partition(": ")
        file, line, _column = where.rsplit(":", 2)
        assert Path(file).resolve() == Path(__file__).resolve()
        assert own_lines[int(line) - 1].strip() == text
    body = source.split("def clipped", 1)[1].splitlines()
    relu = next(i for i, line in enumerate(body) if "op.Relu(" in line and not line.strip().startswith("#"))
    assert body[relu - 1].strip().endswith(": y = op.Relu(doubled)")
    assert "node_metadata" not in source  # the comment is the link's Python spelling, not a stale entry


def test_a_hostile_link_stays_one_comment() -> None:
    import ast

    import onnx.helper as oh

    import converter

    node = oh.make_node("Relu", ["x"], ["y"])
    node.metadata_props.add(key=LOCATION_KEY, value="m.py:1:1")
    node.metadata_props.add(key=SOURCE_KEY, value="y = x\nimport os; os.system('echo owned')\r# ")
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", 1, [2])], [oh.make_tensor_value_info("y", 1, [2])])
    source = converter.to_python(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10))
    tree = ast.parse(source)
    assert not any(isinstance(found, ast.Import) and found.names[0].name == "os" for found in ast.walk(tree))
    assert "# from m.py:1:1: y = x\\nimport os; os.system('echo owned')\\r#" in source


@script()
def inner_relu(x: Vec) -> Vec:
    return op.Relu(x)


@script()
def calls_inner(x: Vec) -> Vec:
    return inner_relu(x) * 2.0


def test_nodes_of_model_local_functions_name_their_lines() -> None:
    model = calls_inner.to_model_proto(source_links=True, io_types={"x": FLOAT[3]})
    onnx.checker.check_model(model, full_check=True)
    (function,) = model.functions
    (relu,) = function.node
    link = read_link({p.key: p.value for p in relu.metadata_props})
    lines, first = inspect.getsourcelines(inner_relu.python_function)
    assert link is not None and link.source == "return op.Relu(x)"
    assert link.line == first + next(i for i, text in enumerate(lines) if "op.Relu" in text)
    call = next(node for node in model.graph.node if node.op_type == "inner_relu")
    assert read_link({p.key: p.value for p in call.metadata_props}).source == "return inner_relu(x) * 2.0"
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    np.testing.assert_allclose(run_model(model, [x])[0], np.maximum(x, 0) * 2)
