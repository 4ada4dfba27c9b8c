"""The checking of every export is on, reaches every facade, and fails what it should.

``tests/checked_exports.py`` wraps the functions that hand a model or function proto to
the user; these tests make sure the wrapping cannot be off or bypassed without a test
failing: it is installed, it covers each public function of the facades that returns a
proto, it records what ``onnx.checker`` refuses (an export the checker refuses, built
here on purpose), and it keeps quiet for valid models and for a model whose mistake was
inherited from the file it was read from.
"""

from __future__ import annotations

import inspect

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import pytest

import converter
import dsl.script_function
from converter.from_onnx import model_from_proto
from converter.to_onnx import function_to_proto, model_to_proto
from dsl import FLOAT, ir, script
from dsl import opset18 as op
from tests import checked_exports


@script()
def scaled(x: FLOAT["N"]) -> FLOAT["N"]:
    return op.Mul(x, op.Constant(value_float=2.0))


def _untyped_output_model() -> ir.Model:
    """An IR model whose output has no type: exported without inference, the checker refuses it."""
    x, y = ir.Value("x", FLOAT[3]), ir.Value("y")
    relu = ir.Node("Relu", "", [x], [y])
    y.producer = relu
    return ir.Model(ir.Graph("untyped", [x], [y], [relu]), opset_imports={"": 18})


def _taken_findings() -> list[tuple[str, str, str]]:
    """What the wrapping recorded in this test, cleared so that teardown does not fail it."""
    found = list(checked_exports.FINDINGS)
    checked_exports.FINDINGS.clear()
    return found


def test_the_checking_is_installed_for_this_run() -> None:
    assert checked_exports.installed()
    import dsl.markup

    # (names bound before the wrapping, as a package re-exports its module's function, are wrapped too)
    for bound in (model_to_proto, dsl.markup.to_model_proto, dsl.script_function.ScriptFunction.to_model_proto):
        assert hasattr(bound, "_checked_export_of")


def test_every_facade_returning_a_proto_is_wrapped() -> None:
    """A new public function that returns a ModelProto must be added to FACADES."""
    wrapped = {(module, owner, name) for module, owner, name in checked_exports.FACADES}
    seen = []
    for module, owner in ((converter, ""), (dsl.script_function, ""), (dsl.script_function.ScriptFunction,
                                                                       "ScriptFunction")):
        for name, member in vars(module).items():
            target = getattr(member, "_checked_export_of", member)
            if name.startswith("_") or not callable(target):
                continue
            returns = str(inspect.signature(target).return_annotation) if inspect.isfunction(target) else ""
            if "ModelProto" in returns or "FunctionProto" in returns:
                module_name = module.__module__ if owner else module.__name__
                assert (module_name, owner, name) in wrapped, f"{module_name}.{owner}.{name} is not checked"
                seen.append(name)
    assert {"merge", "cut", "to_model_proto", "to_function_proto", "export_onnx_lib"} <= set(seen)


def test_a_refused_export_is_recorded_against_the_test() -> None:
    proto = model_to_proto(_untyped_output_model(), infer_output_types=False)
    found = _taken_findings()
    assert [(entry, name) for entry, name, _ in found] == [("converter.to_onnx.model_to_proto", "untyped")]
    assert "Field 'type' of 'value_info' is required" in found[0][2]
    with pytest.raises(onnx.checker.ValidationError):  # (the oracle: onnx's checker itself)
        onnx.checker.check_model(proto, full_check=True)


def test_a_shape_only_full_inference_contradicts_is_refused() -> None:
    """A declared output shape that inference contradicts passes the plain checker: the
    check runs with full_check=True."""
    x, y = ir.Value("x", FLOAT[3]), ir.Value("y", FLOAT[2])
    relu = ir.Node("Relu", "", [x], [y])
    y.producer = relu
    proto = model_to_proto(ir.Model(ir.Graph("contradicted", [x], [y], [relu]), opset_imports={"": 18}))
    onnx.checker.check_model(proto)  # (the plain check passes)
    found = _taken_findings()
    assert len(found) == 1 and "Inferred shape and existing shape differ" in found[0][2]


def test_valid_exports_record_nothing() -> None:
    scaled.to_model_proto()
    scaled.to_function_proto()
    model_to_proto(_untyped_output_model())  # (inference types the output)
    assert _taken_findings() == []


def test_a_function_is_checked_with_its_own_opset_imports() -> None:
    proto = function_to_proto(scaled.function)
    assert checked_exports.check_exported(proto) is None
    del proto.opset_import[:]
    assert "No Opset registered for domain" in (checked_exports.check_exported(proto) or "")


def test_a_mistake_inherited_from_the_file_read_is_not_failed() -> None:
    graph = oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "broken", [oh.make_tensor_value_info("x", 1, [3])],
                          [oh.make_tensor_value_info("y", 1, None)])  # (an output without a rank)
    broken = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    model_to_proto(model_from_proto(broken), infer_output_types=False)
    assert checked_exports.INPUT_REFUSALS and _taken_findings() == []


def test_weights_kept_outside_the_proto_are_checked_as_zeros(tmp_path) -> None:
    from converter.external_data import ExternalDataWriter

    weight = onnx.numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    graph = oh.make_graph([oh.make_node("MatMul", ["x", "w"], ["y"])], "weighted",
                          [oh.make_tensor_value_info("x", 1, [2, 64])], [oh.make_tensor_value_info("y", 1, [2, 64])],
                          [weight])
    model = model_from_proto(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]))
    with open(tmp_path / "weighted.data", "wb") as stream:
        proto = model_to_proto(model, external_data=ExternalDataWriter(stream, "weighted.data", threshold=1024))
    assert proto.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL
    assert _taken_findings() == []
