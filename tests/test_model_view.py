"""The graph viewer: a model served to Netron on 127.0.0.1, drawn in headless Chromium with
its nodes' source links and observed values (``converter.show``, ``onnxquill view``)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import onnx
import pytest

import converter
from dsl import FLOAT, script
from dsl import opset18 as op
from dsl.source_links import read_link
from tests.headless_chromium import chromium, find_chromium

ROOT = Path(__file__).resolve().parent.parent
Rows = FLOAT["B", 8]


@script()
def gated_mlp(x: Rows, w: FLOAT[8, 8], shift: FLOAT[8]) -> Rows:
    hidden = x @ w
    gate = op.Sigmoid(hidden)
    rooted = op.Sqrt(hidden + shift)
    return op.Relu(rooted) * gate


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal((2, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32),
            np.full(8, 20.0, np.float32)]


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return bytes(answer.read())


def _expected_link(op_type: str) -> str:
    """file:line:column of the gated_mlp line calling ``op_type``, found in this file's text."""
    lines, first = inspect.getsourcelines(gated_mlp.python_function)
    for offset, text in enumerate(lines):
        column = text.find(f"op.{op_type}(")
        if column >= 0:
            return f"{gated_mlp.function.graph.nodes[0].location.file}:{first + offset}:{column + 1}"
    raise AssertionError(op_type)


def test_show_serves_the_model_on_localhost_only(tmp_path: Path) -> None:
    import netron

    secret = tmp_path / "secret.json"  # a file of a served kind, outside the viewer's folder
    secret.write_text("{}")
    beside = os.path.relpath(secret, os.path.dirname(os.path.realpath(netron.__file__)))
    view = converter.show(gated_mlp)
    try:
        assert view.server.server_address[0] == "127.0.0.1"
        page = _fetch(view.url).decode()
        assert '<meta name="file" content="/data/gated_mlp.onnx">' in page
        served = onnx.load_from_string(_fetch(view.url + "data/gated_mlp.onnx"))
        assert served.SerializeToString() == view.model.SerializeToString()
        sqrt = next(node for node in served.graph.node if node.op_type == "Sqrt")
        assert read_link({p.key: p.value for p in sqrt.metadata_props}).where == _expected_link("Sqrt")
        traversals = (beside.replace("/", "%2F"), urllib.parse.quote(beside, safe="/"))
        for outside in ("data/other.onnx", "..%2F..%2F..%2Fetc%2Fpasswd", "../server.py", "index.py", *traversals):
            with pytest.raises(urllib.error.HTTPError) as refused:
                _fetch(view.url + outside)
            assert refused.value.code == 404, outside
        assert f'<iframe src="{view.url}"' in view._repr_html_()
    finally:
        view.stop()
    assert not view.serving
    with pytest.raises(urllib.error.URLError):
        _fetch(view.url)


def test_a_missing_viewer_is_a_dsl_error_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsl.errors import DslError

    monkeypatch.setitem(sys.modules, "netron", None)  # import netron raises ImportError
    with pytest.raises(DslError, match="needs Netron") as raised:
        converter.show(gated_mlp, [])  # (too few inputs: the missing viewer is said before a run is tried)
    assert "onnxquill[view]" in str(raised.value)


def test_show_leaves_the_callers_proto_alone() -> None:
    model = gated_mlp.to_model_proto()
    before = model.SerializeToString()
    view = converter.show(model, _inputs())
    view.stop()
    assert model.SerializeToString() == before
    assert view.model.SerializeToString() != before


def test_observed_values_match_numpy() -> None:
    x, w, shift = _inputs()
    shift[3] = -1e4  # a planted NaN: the Sqrt of a negative number
    view = converter.show(gated_mlp, [x, w, shift])
    view.stop()
    hidden = x @ w
    with np.errstate(invalid="ignore"):
        rooted = np.sqrt(hidden + shift)
    by_op = {node.op_type: {p.key: p.value for p in node.metadata_props} for node in view.model.graph.node}
    summary = view.observed[view.model.graph.node[[n.op_type for n in view.model.graph.node].index("Sqrt")].output[0]]
    assert summary.shape == (2, 8) and summary.dtype == "float32"
    assert summary.nan_count == int(np.isnan(rooted).sum()) == 2
    finite = rooted[np.isfinite(rooted)]
    assert summary.minimum == pytest.approx(finite.min(), rel=1e-6)
    assert summary.maximum == pytest.approx(finite.max(), rel=1e-6)
    assert summary.mean == pytest.approx(finite.mean(), rel=1e-5)
    # the first node whose output holds a NaN is the Sqrt; the Relu and Mul after it only pass it on
    first = [op_type for op_type, props in by_op.items() if "onnxquill.first_nonfinite" in props]
    assert first == ["Sqrt"]
    sigmoid = view.observed[next(n.output[0] for n in view.model.graph.node if n.op_type == "Sigmoid")]
    assert sigmoid.nan_count == 0 and sigmoid.maximum == pytest.approx((1 / (1 + np.exp(-hidden))).max(), rel=1e-6)
    typed = {entry.name: entry for entry in view.model.graph.value_info}
    for name, entry in typed.items():
        assert entry.doc_string == f"observed: {view.observed[name]}"
    assert [d.dim_value for d in typed[next(iter(typed))].type.tensor_type.shape.dim] == [2, 8]


def test_a_nan_coming_in_is_not_marked_where_it_passes(tmp_path: Path) -> None:
    from tests.test_source_links import clipped

    # the NaN is in the input: no node makes it, not even the If whose branches read it
    view = converter.show(clipped, [np.array([1.0, np.nan, 2.0], np.float32)])
    view.stop()
    marked = [n.op_type for n in view.model.graph.node if any(p.key == "onnxquill.first_nonfinite"
                                                                for p in n.metadata_props)]
    assert marked == []
    assert view.observed["y"].nan_count == 1 and view.observed["x"].nan_count == 1


def test_show_reads_paths_python_files_and_markup(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(gated_mlp.to_model_proto(), path)
    source = tmp_path / "tiny.py"
    source.write_text("from dsl import FLOAT, script\nfrom dsl import opset18 as op\n\n\n@script()\n"
                      "def tiny(x: FLOAT[2]) -> FLOAT[2]:\n    return op.Relu(x)\n")
    markup = ROOT / "tests" / "data" / "markup" / "ffn_rep"
    for model, options in ((path, {}), (source, {}), (markup, {"bindings": {"n": 3, "layers": 1}})):
        view = converter.show(model, **options)
        view.stop()
        assert len(view.model.graph.node) >= 1
    assert read_link({p.key: p.value for p in view.model.graph.node[-1].metadata_props}) is not None
    tiny = converter.show(source)
    tiny.stop()
    link = read_link({p.key: p.value for p in tiny.model.graph.node[0].metadata_props})
    assert link is not None and (link.line, link.source) == (7, "return op.Relu(x)")


def test_view_command_serves_until_stopped(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(gated_mlp.to_model_proto(), path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-m", "converter.cli", "view", str(path), "--no-browser"],
                               stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving mlp.onnx at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        assert _fetch(url + "data/mlp.onnx") == path.read_bytes()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_browser_draws_the_graph_with_source_links_and_values(tmp_path: Path) -> None:
    browser_path, driver_path, why = find_chromium()
    if browser_path is None or driver_path is None:
        pytest.skip(why)
    x, w, shift = _inputs()
    shift[0] = -1e4
    view = converter.show(gated_mlp, [x, w, shift])
    expected = {"MatMul", "Sigmoid", "Add", "Sqrt", "Relu", "Mul"}
    try:
        with chromium(browser_path, driver_path) as browser:
            browser.open(view.url)
            drawn: dict[str, str] = {}
            deadline = time.monotonic() + 60
            while not expected <= set(drawn) and time.monotonic() < deadline:  # (nodes fade in: no text at first)
                drawn = {browser.text(node): node for node in browser.wait_for("g.graph-node")}
                time.sleep(0.2)
            assert expected <= set(drawn), sorted(drawn)
            browser.click(drawn["Sqrt"])
            assert browser.wait_for(".sidebar-item"), "no node properties after a click"
            sidebar = " ".join(browser.text(item) for item in browser.elements(".sidebar-item"))
            dom = browser.dom()
            (tmp_path / "graph.png").write_bytes(browser.screenshot())
    finally:
        view.stop()
    assert _expected_link("Sqrt") in sidebar
    assert "rooted = op.Sqrt(hidden + shift)" in sidebar
    with np.errstate(invalid="ignore"):
        nan_count = int(np.isnan(np.sqrt(x @ w + shift)).sum())
    assert nan_count and f"NaN={nan_count}" in sidebar and f"rooted ({nan_count} NaN, 0 inf) from finite inputs" in sidebar
    assert 'value="onnxquill.location"' in dom and 'value="onnxquill.first_nonfinite"' in dom
    assert (tmp_path / "graph.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@script()
def to_image(pixels: FLOAT[224, 224, 3]) -> FLOAT[1, 3, 224, 224]:
    scaled = op.Sqrt(pixels / 255.0)
    image = op.Unsqueeze(op.Transpose(scaled, perm=[2, 0, 1]), [0])
    return image


def test_the_browser_draws_a_zoo_model_merged_with_scripted_code() -> None:
    browser_path, driver_path, why = find_chromium()
    if browser_path is None or driver_path is None:
        pytest.skip(why)
    squeezenet = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                              "light_squeezenet.onnx")
    model = converter.merge(to_image.to_model_proto(source_links=True), squeezenet, io_map=[("image", "data_0")])
    convolutions = sum(node.op_type == "Conv" for node in model.graph.node)
    assert convolutions > 20
    view = converter.show(model)
    try:
        with chromium(browser_path, driver_path) as browser:
            browser.open(view.url)
            texts: list[str] = []
            deadline = time.monotonic() + 60
            while (texts.count("Conv") < convolutions or "Sqrt" not in texts) and time.monotonic() < deadline:
                nodes = browser.wait_for("g.graph-node")
                texts = [browser.text(node).split("\n")[0] for node in nodes]  # (the op, then its weights)
                time.sleep(0.2)
            assert texts.count("Conv") == convolutions, texts
            browser.click(nodes[texts.index("Sqrt")])
            assert browser.wait_for(".sidebar-item")
            sidebar = " ".join(browser.text(item) for item in browser.elements(".sidebar-item"))
    finally:
        view.stop()
    lines, first = inspect.getsourcelines(to_image.python_function)
    line = first + next(i for i, text in enumerate(lines) if "op.Sqrt(" in text)
    assert f"test_model_view.py:{line}:" in sidebar and "scaled = op.Sqrt(pixels / 255.0)" in sidebar
