"""Models exported by torch inside the test, read back as Python and compiled again.

Each model of :mod:`tests.exported_models` (a CNN, a transformer block with a padding
mask, an LSTM), from each ``torch.onnx`` exporter that runs here, must convert to
readable Python at once (no weights path: large tensors referenced, not inlined),
compile back to an isomorphic model with its metadata (``check_metadata=True``), and
compute what torch computes.
"""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.python_source import INLINE_LIMIT
from converter.script_module import load_script_function, model_options
from tests.exported_models import EXPORTERS, MODELS, example_inputs, exporter_problem, load, torch_outputs
from tests.roundtrip import run

pytestmark = pytest.mark.torch
pytest.importorskip("torch", reason="the torch extra is not installed")

CASES = [(name, exporter) for exporter in EXPORTERS for name in MODELS]


def _model(name: str, exporter: str):
    problem = exporter_problem(exporter)
    if problem is not None:
        pytest.skip(problem)
    return load(name, exporter)


@pytest.mark.parametrize(("name", "exporter"), CASES, ids=[f"{n}-{e}" for n, e in CASES])
def test_exported_model_reads_as_short_python_and_compiles_back(name: str, exporter: str, tmp_path) -> None:
    model = _model(name, exporter)
    source = converter.to_python(model)
    # Readable at once: every tensor over the inline limit is referenced, none inlined.
    large = {t.name for t in model.graph.initializer if int(np.prod(t.dims)) > INLINE_LIMIT}
    assert large and len(source.weights) >= len(large)  # (and any large Constant)
    assert "weights = load_weights(__file__, 'model.npz')" in source and source.weights_path is None
    assert max(map(len, source.splitlines())) < 400
    assert not (tmp_path / "model.npz").exists()
    saved = source.save(tmp_path / "net.py")
    assert saved.weights_path == str(tmp_path / "net.npz") and (tmp_path / "net.npz").is_file()
    assert "weights = load_weights(__file__, 'net.npz')\n" in (tmp_path / "net.py").read_text()
    function = load_script_function(tmp_path / "net.py")
    rebuilt = function.to_model_proto(**model_options(function))
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)
    inputs = example_inputs(name)
    expected = torch_outputs(name, inputs)
    for got in (run(model, inputs), run(rebuilt, inputs)):
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_exported_metadata_survives_the_round_trip(exporter: str, tmp_path) -> None:
    """What an exporter records (node metadata_props, value_info, the IR version) comes back."""
    model = _model("transformer", exporter)
    model.graph.node[3].metadata_props.add(key="pkg.torch.onnx.stack_trace", value='File "block.py", line 9')
    model.graph.metadata_props.add(key="exported_by", value=exporter)
    model.ir_version = 10  # (what the dynamo exporter writes; metadata_props need it)
    source = converter.to_python(model)
    source.save(tmp_path / "block.py")
    function = load_script_function(tmp_path / "block.py")
    rebuilt = function.to_model_proto(**model_options(function))
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)
    assert rebuilt.ir_version == model.ir_version
    # (the dynamo exporter records metadata on every node: the one added here among them)
    def node_props(proto):
        return sorted(repr({p.key: p.value for p in n.metadata_props}) for n in proto.graph.node)

    assert node_props(rebuilt) == node_props(model)
    assert any(p.value == 'File "block.py", line 9' for n in rebuilt.graph.node for p in n.metadata_props)
    del rebuilt.graph.node[[n.metadata_props != [] for n in rebuilt.graph.node].index(True)].metadata_props[:]
    assert converter.isomorphic(model, rebuilt) and not converter.isomorphic(model, rebuilt, check_metadata=True)
