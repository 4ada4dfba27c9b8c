"""Mutation check of the test suite: plant one small bug at a time and see a test fail.

Each mutation replaces one snippet of text, found by its content (never by line number,
so it survives edits elsewhere in the file), in a temporary copy of the project; then
the tests that should notice run on that copy (a fast subset, stopping at the first
failure).  A mutation the tests do not notice *survives*: a gap in the suite.  The
project's own files are never edited.

    python bench/mutations.py              # every mutation, then the table
    python bench/mutations.py --only E1 C2 # some of them
    python bench/mutations.py --list       # the mutations, without running anything

Outcomes: ``killed`` (a test failed), ``killed (error)`` (the tests could not even be
collected: an import or syntax error, which no user would miss either), ``SURVIVED``,
``target not found`` (the snippet is not in the file, or not exactly once: the code moved
on and the mutation must be rewritten; never counted as killed).  Before the mutations,
each test subset runs once on the unmutated copy and must pass.  The exit status is 1
when a mutation survived or lost its target.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMPARE = ("tests/test_compare_attributes.py", "tests/test_compare.py")
EAGER = ("tests/test_eager_attribute_key.py", "tests/test_eager.py", "tests/test_python_operators.py")
COMPILER = ("tests/test_python_operators.py", "tests/test_frontend_control_flow.py", "tests/test_frontend_indexing.py",
            "tests/test_frontend_python.py")
TO_PYTHON = ("tests/test_to_python_literals.py", "tests/test_to_python.py")
TO_ONNX = ("tests/test_to_onnx.py", "tests/test_python_operators.py", "tests/test_eager_attribute_key.py")
MARKUP = ("tests/test_markup_expressions.py", "tests/test_markup_projects.py", "tests/test_markup_backends.py")
UNPICKLER = ("tests/test_markup_projects.py", "tests/test_markup_errors.py", "tests/test_markup_agrippa_compat.py")
TORCH_FUNCTIONS = ("tests/test_torch_module_functions.py",)
TORCH_TRAINING = ("tests/test_torch_module_training.py", "tests/test_torch_module_scan8.py")
TORCH_FAST = ("tests/test_torch_module_fast_paths.py",)
CUT = ("tests/test_passes_cut.py",)
WIRE = ("tests/test_node_wire.py", "tests/test_to_onnx.py")
MERGE = ("tests/test_passes_merge.py", "tests/test_passes_prefix.py")
SOURCE_LINKS = ("tests/test_source_links.py",)
VIEW = ("tests/test_model_view.py",)
PROGRESS = ("tests/test_progress.py",)
SHAPES = ("tests/test_shape_rules.py", "tests/test_frontend_tensor_properties.py")
CP_STATIC = ("tests/test_frontend_static_python.py", "tests/test_static_python_contract.py")
CP_WEIGHTS = ("tests/test_model_weights.py", "tests/test_readme_decoder.py")
CHECKED_EXPORTS = ("tests/test_checked_exports.py", "tests/test_frontend_python.py")
EAGER_FAILURES = ("tests/test_eager_op_failures.py",)
TL = ("tests/test_torch_lib_constructs.py",)
VL_INPUTS = ("tests/test_shape_rules_inputs.py",)
AGREEMENT = ("tests/test_eager_onnxruntime_agreement.py",)


@dataclass(frozen=True)
class Mutation:
    key: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = [
    # ---------------------------------------------------------------- converter.compare
    Mutation("C1", "INT/INTS/STRING attribute values ignored", "converter/compare.py",
             "        elif value_a != value_b:\n", "        elif False:\n", COMPARE),
    Mutation("C2", "float attributes equal within 1%", "converter/compare_values.py",
             "    return _same_float_values(np.asarray(first, dtype=np.float32), np.asarray(second, dtype=np.float32))",
             "    return bool(np.allclose(np.asarray(first, dtype=np.float32), np.asarray(second, dtype=np.float32), "
             "rtol=0.01))", COMPARE),
    Mutation("C3", "op types not compared", "converter/compare.py",
             '            raise Different(f"{render(step)}: node {here}")', "            pass", COMPARE),
    Mutation("C4", "tensor values not compared", "converter/compare_values.py",
             "    elif array_a.tobytes() == array_b.tobytes():", "    elif True:", COMPARE),
    Mutation("C5", "tensor shapes not compared", "converter/compare_values.py",
             "    if list(tensor_a.dims) != list(tensor_b.dims):", "    if False:", COMPARE),
    Mutation("C6", "subgraph attributes not compared", "converter/compare.py",
             '            self._subgraph(value_a, value_b, scope_a, scope_b, f"{attr_a.name}", step)',
             "            pass", COMPARE),
    # (Not "graph inputs paired whatever their position": graph inputs are paired by position
    # before the walk, so dropping the walk's own check of it changes nothing: an equivalent mutant.)
    Mutation("C7", "node input counts not compared", "converter/compare.py",
             "        if len(inputs_a) != len(inputs_b):", "        if False:", COMPARE),
    Mutation("C8", "opset versions not compared", "converter/compare.py",
             "            if first_opsets.get(domain) != second_opsets.get(domain):", "            if False:", COMPARE),
    Mutation("C9", "-0.0 equal to 0.0", "converter/compare_values.py",
             "    return bool(np.array_equal(np.signbit(first) | np.isnan(first), np.signbit(second) | np.isnan(second)))",
             "    return True", COMPARE),
    Mutation("C10", "attribute kinds not compared", "converter/compare.py",
             "        if attr_a.type != attr_b.type:", "        if False:", COMPARE),
    # ------------------------------------------------------------ eager cache and lowering
    Mutation("E1", "cache key drops an array attribute's shape", "eager/attributes.py",
             "return (np.ndarray, value.dtype.str, value.shape, ", "return (np.ndarray, value.dtype.str, ", EAGER),
    Mutation("E2", "cache key drops an array attribute's dtype", "eager/attributes.py",
             "return (np.ndarray, value.dtype.str, value.shape, ", "return (np.ndarray, value.shape, ", EAGER),
    Mutation("E3", "cache key rounds float attributes", "eager/attributes.py",
             "        return (cls, value.hex())", "        return (cls, round(value, 2))", EAGER),
    Mutation("E4", "cache key joins 0.0 and -0.0", "eager/attributes.py",
             "        return (cls, value.hex())", "        return (cls, value)", EAGER),
    Mutation("E5", "cache key ignores the order of list attributes", "eager/attributes.py",
             "        return (list, tuple(freeze(v) for v in value))",
             "        return (list, tuple(sorted(freeze(v) for v in value)))", EAGER),
    Mutation("E6", "cache key drops the input types", "eager/op_call.py",
             "    key = (facts.key, attribute_key(kwargs) if kwargs else (), signature, num_outputs)",
             "    key = (facts.key, attribute_key(kwargs) if kwargs else (), num_outputs)", EAGER),
    Mutation("E7", "eager Scan ignores scan_output_directions", "eager/control_flow.py",
             "        stacked = np.stack(collected[::-1] if direction else collected)",
             "        stacked = np.stack(collected)", EAGER),
    Mutation("E8", "eager Scan ignores scan_input_directions", "eager/control_flow.py",
             "    inputs = [a[::-1] if d else a for a, d in zip(inputs, directions)]",
             "    inputs = [a for a, d in zip(inputs, directions)]", EAGER),
    Mutation("E9", "eager `1 - x` computes x - 1", "eager/tensor.py",
             '    def __rsub__(self, other: Any) -> Any:\n        return self._binary("Sub", other, self)',
             '    def __rsub__(self, other: Any) -> Any:\n        return self._binary("Sub", self, other)', EAGER),
    Mutation("E10", "eager `2 / x` computes x / 2", "eager/tensor.py",
             '    def __rtruediv__(self, other: Any) -> Any:\n        return self._binary("Div", other, self)',
             '    def __rtruediv__(self, other: Any) -> Any:\n        return self._binary("Div", self, other)', EAGER),
    # -------------------------------------------------------------------- the compiler
    Mutation("L1", "range() trip count with a tensor step: wrong sign", "dsl/frontend/control_flow.py",
             'span = self.arith("Sub", self.arith("Add", span, step_i, node), sign, node)',
             'span = self.arith("Add", self.arith("Add", span, step_i, node), sign, node)', COMPILER),
    Mutation("L2", "range() trip count with a negative constant step", "dsl/frontend/control_flow.py",
             "step_i - (1 if step_i > 0 else -1)", "step_i - (1 if step_i > 0 else 0)", COMPILER),
    Mutation("L3", "unary + lowered to Neg", "dsl/operators.py",
             '"UAdd": OpSpelling("Identity"),', '"UAdd": OpSpelling("Neg"),', COMPILER),
    Mutation("L4", "<= lowered to Less", "dsl/operators.py",
             '"LtE": OpSpelling("LessOrEqual"),', '"LtE": OpSpelling("Less"),', COMPILER),
    Mutation("L5", ">= lowered to Greater", "dsl/operators.py",
             '"GtE": OpSpelling("GreaterOrEqual"),', '"GtE": OpSpelling("Greater"),', COMPILER),
    Mutation("L6", "!= lowered to Equal", "dsl/operators.py",
             '"NotEq": OpSpelling("Equal", negate=True),', '"NotEq": OpSpelling("Equal"),', COMPILER),
    Mutation("L7", "integer % with C's sign (fmod=1)", "dsl/operators.py",
             '    "Mod": OpSpelling("Mod"),', '    "Mod": OpSpelling("Mod", attributes=(("fmod", 1),)),', COMPILER),
    Mutation("L8", "if: the then branch gets the else body", "dsl/frontend/control_flow.py",
             '"then_branch": ir.Attr("then_branch", ir.AttrKind.GRAPH, then.builder.graph',
             '"then_branch": ir.Attr("then_branch", ir.AttrKind.GRAPH, orelse.builder.graph', COMPILER),
    Mutation("L9", "`if c: break` keeps going while c", "dsl/frontend/control_flow.py",
             '        flag = condition if then_keeps_going else self.builder.operator("Not", [condition], location)',
             "        flag = condition", COMPILER),
    Mutation("L10", "x[::-1] starts at 0", "dsl/indexing.py",
             "(0 if forward else INT64_MAX)", "(0 if forward else 0)", COMPILER),
    # ---------------------------------------------------------------- Python back end
    Mutation("P1", "float64 literals written with 6 digits", "converter/python_source/literals.py",
             "    return str(dtype(value)) if dtype is not float else repr(value)",
             '    return str(dtype(value)) if dtype is not float else f"{value:.6g}"', TO_PYTHON),
    Mutation("P2", "Sub written back as +", "dsl/operators.py",
             '"Add": "+", "Sub": "-",', '"Add": "+", "Sub": "+",', TO_PYTHON),
    Mutation("P3", "float32 array literals written through float16", "converter/python_source/literals.py",
             "        items = [float_text(float(v), scalar) for v in array.reshape(-1).tolist()]",
             "        items = [float_text(float(np.float16(v)), scalar) for v in array.reshape(-1).tolist()]", TO_PYTHON),
    # ------------------------------------------------------------------- ONNX back end
    Mutation("O1", "INTS attributes written reversed", "converter/onnx_encoding.py",
             "        proto.ints.extend(int(v) for v in value)",
             "        proto.ints.extend(int(v) for v in reversed(value))", TO_ONNX),
    Mutation("O2", "FLOAT attributes written through float16", "converter/onnx_encoding.py",
             "        proto.f = float(value)", "        proto.f = float(__import__('numpy').float16(value))", TO_ONNX),
    Mutation("O3", "named dimensions dropped from types", "converter/value_encoding.py",
             "        elif isinstance(dim, str):\n            entry.dim_param = dim",
             "        elif isinstance(dim, str):\n            pass", TO_ONNX),
    # ------------------------------------------------------------------------- markup
    Mutation("M1", "expr(): a - b computes b - a", "dsl/markup/expressions.py",
             "                result = left - right", "                result = right - left", MARKUP),
    Mutation("M2", "expr(): unary minus ignored", "dsl/markup/expressions.py",
             '            return -operand if value == "-" else +operand', "            return operand", MARKUP),
    Mutation("M3", "rep: one copy too few", "dsl/markup/blocks.py",
             "        for copy in range(rep):", "        for copy in range(max(rep - 1, 1)):", MARKUP),
    Mutation("M4", "stretch concatenates on axis 0", "dsl/markup/blocks.py",
             'attributes={"axis": ir.Attr("axis", ir.AttrKind.INT, -1, location=element.location)}',
             'attributes={"axis": ir.Attr("axis", ir.AttrKind.INT, 0, location=element.location)}', MARKUP),
    # ---------------------------------------------------------------------- unpickler
    Mutation("U1", "the unpickler resolves any global", "dsl/markup/torch_pickle.py",
             "        if (module, name) in _NUMPY_GLOBALS:", "        if True:", UNPICKLER),
    Mutation("U2", "the unpickler allows builtins.eval and os.system", "dsl/markup/torch_pickle.py",
             '    ("numpy", "ndarray"), ("numpy", "dtype"), ("collections", "OrderedDict"),\n}',
             '    ("numpy", "ndarray"), ("numpy", "dtype"), ("collections", "OrderedDict"),\n'
             '    ("builtins", "eval"), ("os", "system"), ("posix", "system"),\n}',
             UNPICKLER),
    # ----------------------------------------------------------- torch back end, composition
    Mutation("T1", "function calls run on the eager back end (no gradient)", "converter/torch_module/graph_builder.py",
             "        if node.callee is not None:\n            self.call_function(node, opsets)\n            return\n",
             "", TORCH_FUNCTIONS),
    Mutation("T2", "strings in untyped values reach torch kernels", "converter/torch_module/graph_builder.py",
             " or any(value in self.lacking for value in node.inputs)", "", TORCH_FUNCTIONS),
    Mutation("T3", "opset-8 Scan reads a reversed input from the padded end", "converter/torch_module/control_flow.py",
             "value[entry].select(0, length - 1 - step if backward else step)",
             "value[entry].select(0, value.shape[1] - 1 - step if backward else step)", TORCH_TRAINING),
    Mutation("T4", "BatchNorm updates statistics the graph computes", "converter/torch_module/training.py",
             "            if self.stored and not (mean.requires_grad or var.requires_grad):",
             "            if not (mean.requires_grad or var.requires_grad):", TORCH_TRAINING),
    Mutation("T5", "MatMul+Add fused though the product is read elsewhere", "converter/torch_module/fusion.py",
             " and len(product.users) == 1 and", " and", TORCH_FAST),
    Mutation("T6", "shape arithmetic: Gather takes the first size", "converter/torch_module/shape_values.py",
             "        item = _item(builder, shape, indices)\n", "        item = _item(builder, shape, 0)\n",
             TORCH_FAST),
    Mutation("L11", "x[-9::-1] on a short axis selects the first element", "dsl/indexing.py",
             "                if _is_int(step) and step < 0 and _is_int(start) and start < -1:\n",
             "                if False:\n", COMPILER),
    Mutation("T7", "a backward Slice from before the first element selects nothing", "converter/torch_module/kernels/shapes.py",
             "    if step < 0 and start < -size:\n        start = 0\n", "", TORCH_FAST),
    Mutation("K1", "the copying cut does not pre-map outputs (unsorted graphs)", "dsl/passes/cut.py",
             "            for value in node.outputs:\n                copier.value(value)\n", "            pass\n", CUT),
    # ------------------------------------------------------------ nodes as wire-format bytes
    Mutation("W1", "negative INTS attributes encoded as their low 32 bits", "converter/node_wire.py",
             "packed = b\"\".join(_varint(v & _MASK64) for v in key)",
             "packed = b\"\".join(_varint(v & 0xFFFFFFFF) for v in key)", WIRE),
    Mutation("W2", "strings of 128 bytes and more encoded with a one-byte length", "converter/node_wire.py",
             "    return tag + (_SMALL_LENGTHS[size] if size < 128 else _varint(size)) + raw",
             "    return tag + bytes([size & 0x7F]) + raw", WIRE),
    Mutation("W3", "an omitted output is encoded, so a later read cannot name it", "converter/onnx_encoding.py",
             "                if not name:  # omitted: a later read may name it in the written proto\n"
             "                    raise _NeedsProto",
             "                if not name:  # omitted: a later read may name it in the written proto\n"
             "                    pass", WIRE),
    Mutation("W4", "every value_info entry takes the first type written", "converter/onnx_encoding.py",
             "        found = export.wire.types.get(id(value_type))\n",
             "        found = export.wire.types.get(id(value_type)) or next(iter(export.wire.types.values()), None)\n",
             WIRE),
    Mutation("I1", "output types never inferred with data propagation", "converter/inferred_types.py",
             "    if not all(_settled(known.get(name)) for name in wanted):", "    if False:", TO_ONNX),
    Mutation("G1", "the merge rewires only the first node reading a mapped input", "dsl/passes/merge.py",
             "map(_INPUTS, nodes)))):", "map(_INPUTS, nodes[:1])))):", MERGE),
    Mutation("G2", "every name clashing: name_1 taken without checking it is free", "dsl/passes/prefix.py",
             "        if own.isdisjoint(firsts) and taken.isdisjoint(firsts):  # each takes its first choice, name_1\n"
             "            return firsts",
             "        if True:\n            return firsts", MERGE),
    Mutation("W5", "small tensor attributes cached without the tensor's name", "converter/node_wire.py",
             "    return (attr.name, attr.doc_string, tensor.elem_type, tensor.name, tensor.doc_string,",
             "    return (attr.name, attr.doc_string, tensor.elem_type, tensor.doc_string,", WIRE),
    Mutation("W6", "small tensor attributes cached without their shape", "converter/node_wire.py",
             "            array.dtype, array.shape, array.tobytes())", "            array.dtype, array.tobytes())", WIRE),
    Mutation("W7", "graph inputs and initializers not encoded when named", "converter/onnx_encoding.py",
             "            self.read_fields[value] = node_wire.string_field(node_wire.NODE_INPUT, name)",
             "            pass", WIRE),
    Mutation("W8", "graph inputs and value_info written without their doc strings", "converter/onnx_encoding.py",
             "    if value.doc_string:\n        body += node_wire.string_field(node_wire.VALUE_INFO_DOC_STRING",
             "    if False:\n        body += node_wire.string_field(node_wire.VALUE_INFO_DOC_STRING", WIRE),
    Mutation("V1", "a tensor's empty name written as a set field", "converter/value_encoding.py",
             "        if tensor_name:\n            proto.name = tensor_name", "        proto.name = tensor_name",
             ("tests/test_value_encoding.py",)),
    Mutation("VW1", "source link columns written 0-based", "dsl/source_links.py",
             "    return {LOCATION_KEY: str(location),",
             '    return {LOCATION_KEY: f"{location.file}:{location.line}:{location.column}",', SOURCE_LINKS),
    Mutation("VW2", "source links left on the user's IR after a write", "converter/node_source_links.py",
             "            node.metadata_props = earlier", "            pass", SOURCE_LINKS),
    Mutation("VW3", "source links only on the main graph's own nodes (not If/Loop bodies)",
             "converter/node_source_links.py", "            for node, _ in ir.walk(owner):",
             "            for node in owner.nodes:", SOURCE_LINKS),
    Mutation("VW4", "a source link's text written unescaped into to_python's comment",
             "converter/python_source/statements.py",
             '    return "# from " + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)',
             '    return "# from " + text', SOURCE_LINKS),
    Mutation("VW5", "to_python records the source links in node_metadata too", "converter/python_source/metadata.py",
             "if key not in LINK_KEYS}", "if True}", SOURCE_LINKS),
    Mutation("VW6", "first NaN judged without the values an If's branches read", "converter/value_overlay.py",
             "for name in _names_read(node) if name in summaries)", "for name in node.input if name in summaries)",
             VIEW),
    Mutation("VW7", "observed values not written as value doc strings", "converter/value_overlay.py",
             '        entry.doc_string = f"observed: {summary}"', "        pass", VIEW),
    Mutation("VW8", "the viewer served on every interface", "converter/model_view.py",
             '    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)',
             '    server = http.server.ThreadingHTTPServer(("", port), handler)', VIEW),
    Mutation("VW9", "the viewer serves files outside Netron's folder", "converter/model_view.py",
             "            if (os.path.commonpath([folder, target]) != folder or extension not in _MIME_TYPES",
             "            if (extension not in _MIME_TYPES", VIEW),
    Mutation("VW10", "the viewer's page asks for cookie consent (the graph waits behind it)", "converter/model_view.py",
             "                self.send_header(\"Set-Cookie\", \"consent=1; Path=/; SameSite=Strict\")",
             "                pass", VIEW),
    Mutation("VW11", "show writes no source links by default", "converter/model_display.py",
             "port: int = 0, height: int = 600, source_links: bool = True,",
             "port: int = 0, height: int = 600, source_links: bool = False,", VIEW),
    Mutation("VW12", "progress bars drawn under CI", "dsl/progress.py",
             '    if os.environ.get("CI", "").strip().lower() not in _FALSE:\n        return False\n', "", PROGRESS),
    Mutation("VW13", "progress bars drawn at once, not after the delay", "dsl/progress.py",
             "unit_scale=unit_scale, delay=delay,", "unit_scale=unit_scale, delay=0,", PROGRESS),
    Mutation("VW14", "work without steps never shows its time", "dsl/progress.py",
             "        if done.wait(delay):\n            return\n", "        return\n", PROGRESS),
    Mutation("VW15", "eager.run node by node does not advance its bar", "eager/model_runner.py",
             "            if not prefix:\n                self.bar.update(1)\n", "", PROGRESS),
    Mutation("VW16", "no source links in model-local functions", "converter/node_source_links.py",
             "    graphs = [graph, *(function.graph for function in functions)]", "    graphs = [graph]", SOURCE_LINKS),
    # ------------------------------------------------- eager values as numpy arrays, profiles
    Mutation("PR1", "numpy methods' array results left plain ndarrays", "eager/numpy_view.py",
             "        if type(value) is np.ndarray:\n            return type(self)(value, self.from_torch)",
             "        if False:\n            return type(self)(value, self.from_torch)",
             ("tests/test_eager_numpy_view.py",)),
    Mutation("PR2", "x.max() computes the minimum", "eager/numpy_view.py",
             "        return self._result(self.array.max(*args, **_arrays_of(kwargs)))",
             "        return self._result(self.array.min(*args, **_arrays_of(kwargs)))",
             ("tests/test_eager_numpy_view.py",)),
    Mutation("PR3", "np.add(a, x) (what a + x runs) follows numpy, not ONNX", "eager/numpy_view.py",
             "            if operator is not None and len(inputs) == 2:\n                return tensor._binary(",
             "            if False:\n                return tensor._binary(",
             ("tests/test_eager_numpy_view.py",)),
    Mutation("PR4", "a < x with x eager compared as x < a", "eager/numpy_view.py",
             '_MIRRORED = {"Eq": "Eq", "NotEq": "NotEq", "Lt": "Gt", "LtE": "GtE", "Gt": "Lt", "GtE": "LtE"}',
             '_MIRRORED = {"Eq": "Eq", "NotEq": "NotEq", "Lt": "Lt", "LtE": "LtE", "Gt": "Gt", "GtE": "GtE"}',
             ("tests/test_eager_numpy_view.py",)),
    Mutation("PR5", "profile: a line event does not switch the line charged", "eager/profiling.py",
             "            self._stack[-1] = key\n", "            pass\n", ("tests/test_eager_profile.py",)),
    Mutation("PR6", "profile: the wall time of the calls not added up", "eager/profiling.py",
             "            self._wall_s += now - self._outer_start", "            self._wall_s += 0.0",
             ("tests/test_eager_profile.py",)),
    Mutation("PR7", "profile: the op runner hook left installed after it", "eager/profiling.py",
             "        hooks.run_op_eagerly = self._previous_hook\n        profile._running = None",
             "        profile._running = None", ("tests/test_eager_profile.py",)),
    Mutation("PR8", "profile_model: the warm-up run counted", "eager/model_profile.py",
             "    counted = model_runs[-runs:]", "    counted = model_runs", ("tests/test_eager_profile.py",)),
    Mutation("PR9", "profile_model: source links not read", "eager/model_profile.py",
             "        link = read_link({p.key: p.value for p in node.metadata_props}) if node is not None else None",
             "        link = None", ("tests/test_eager_profile.py",)),
    Mutation("PR10", "profile_model: node times read as milliseconds", "eager/model_profile.py",
             '        seconds = event["dur"] * 1e-6', '        seconds = event["dur"] * 1e-3',
             ("tests/test_eager_profile.py",)),
    Mutation("PR11", "profile: an op's time includes the ops it runs", "eager/profiling.py",
             "            tally.total_s += elapsed - inner", "            tally.total_s += elapsed",
             ("tests/test_eager_profile.py",)),
    Mutation("TY1", "opset stub classes answer any attribute (unknown ops pass)", "dsl/op_signatures.pyi",
             "class Opset1(Opset):\n", "class Opset1(Opset):\n    def __getattr__(self, name: str) -> Any: ...\n",
             ("tests/test_typing_corpus.py",)),
    Mutation("TY2", "eager calls of a scripted function untyped (no ParamSpec)", "dsl/script_function.py",
             "    def __call__(self, /, *args: P.args, **kwargs: P.kwargs) -> R:\n        from eager import call_script",
             "    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:\n        from eager import call_script",
             ("tests/test_typing_corpus.py",)),
    Mutation("TY3", "Annotated[Tensor, FLOAT[...]] read as its base (any tensor)", "dsl/types.py",
             "annotation = markers[0] if markers else annotation.__origin__",
             "annotation = annotation.__origin__", ("tests/test_frontend_annotated.py",)),
    Mutation("TY4", "Annotated[int, ...] inside Optional not an attribute", "dsl/frontend/signature.py",
             "    annotation = dsl_types.unwrap_annotated(annotation)  # Annotated[float, \"doc\"] is a float\n",
             "", ("tests/test_frontend_annotated.py",)),
    Mutation("TY5", "the readline history not searched at the prompt", "dsl/frontend/interactive_source.py",
             "        candidates = _history_statements()", "        candidates = iter(())",
             ("tests/test_frontend_interactive.py",)),
    Mutation("TY6", "interactive text accepted on the function's name alone", "dsl/frontend/interactive_source.py",
             "        and found.co_code == code.co_code\n        and found.co_names == code.co_names\n"
             "        and found.co_varnames == code.co_varnames\n", "\n", ("tests/test_frontend_interactive.py",)),
    Mutation("TY7", "integer-only inputs typed as any number in the stub", "dsl/write_op_signatures.py",
             "    if elements <= _INTEGRAL:\n        return \"_Integral\"", "    if elements <= _INTEGRAL:\n        return \"_Number\"",
             ("tests/test_op_signatures.py",)),
    Mutation("TY8", "data-type attributes typed int only (op.Cast(x, to=INT64) flagged)", "dsl/write_op_signatures.py",
             "            annotation = \"_DataType\"", "            annotation = \"int\"", ("tests/test_op_signatures.py",)),
    Mutation("TY9", "the editable install an import hook again", "pyproject.toml",
             'package-dir = { "" = "." }\n', "", ("tests/test_packaging.py",)),
    Mutation("NB1", "profile_model writes a scripted function without source links", "eager/model_profile.py",
             "        proto: onnx.ModelProto = model.to_model_proto(source_links=True)",
             "        proto: onnx.ModelProto = model.to_model_proto(source_links=False)", ("tests/test_eager_profile.py",)),
    Mutation("NB2", "profile_model prints no table", "eager/model_profile.py",
             "    if print_table:\n        print(report.table())\n    return report",
             "    return report", ("tests/test_eager_profile.py",)),
    Mutation("SH1", "MatMul's inner sizes not compared", "dsl/shape_rules.py",
             "    if _differ(a[-1], b[b_axis]):", "    if False:", SHAPES),
    Mutation("SH2", "a shape mistake raised without the location of its node", "dsl/frontend/builder.py",
             "ctx.shapes.record_node(op.name, inputs, attributes, outputs, location, names, opset.version,",
             "ctx.shapes.record_node(op.name, inputs, attributes, outputs, None, names, opset.version,", SHAPES),
    Mutation("SH3", "Reshape's element count not checked without -1", "dsl/shape_rules.py",
             "        wrong = (known != total) if -1 not in dims else", "        wrong = False if -1 not in dims else",
             SHAPES),
    Mutation("SH4", "Concat's non-joined axes not compared", "dsl/shape_rules.py",
             "p for p, (left, right) in enumerate(zip(first, shape)) if p != axis and _differ(left, right)]",
             "p for p, (left, right) in enumerate(zip(first, shape)) if p == axis and _differ(left, right)]", SHAPES),
    Mutation("SH5", "Conv's input channels not multiplied by group", "dsl/shape_rules_gemm_conv.py",
             "(w[1] * group if _static(w[1]) else None)", "(w[1] if _static(w[1]) else None)", SHAPES),
    Mutation("SH6", "declared shapes never compared with inferred ones", "dsl/annotation_checks.py",
             "    ):\n        return  # (the usual case: no message to write)",
             "    ) or True:\n        return  # (the usual case: no message to write)", SHAPES),
    Mutation("SH7", "a symbolic size lowered from axis 0 whatever its axis", "dsl/frontend/tensor_properties.py",
             "np.full(index_shape, size.axis, dtype=np.int64)", "np.full(index_shape, 0, dtype=np.int64)", SHAPES),
    Mutation("SH8", "static sizes of x.shape given as symbolic sizes", "dsl/frontend/tensor_properties.py",
             "int(size) if isinstance(size, (int, np.integer)) else", "int(size) if False else", SHAPES),
    Mutation("SH9", "eager shape diagnosis without the op's attributes", "eager/shape_mismatch.py",
             "                          attributes or {}, constants", "                          {}, constants",
             SHAPES),
    Mutation("SH10", "a 0-d ConstantOfShape value accepted", "dsl/shape_rules.py",
             "    if array.ndim != 1 or array.size != 1:", "    if array.size != 1:", SHAPES),
    Mutation("SH11", "element-wise shapes taken from the first operand unchecked", "dsl/shape_rules.py",
             "            if first == second or second == ():", "            if True:", SHAPES),
    Mutation("SH12", "ONNX's refusal of a node escapes as its own exception", "dsl/frontend/onnx_inference.py",
             "    except onnx.shape_inference.InferenceError as err:", "    except ImportError as err:", SHAPES),
    Mutation("SH13", "an If's outputs get no shape from its branches", "dsl/frontend/control_flow.py",
             "            self.ctx.shapes.set_joined(output, then_value, else_value)\n", "", SHAPES),
    Mutation("SP1", "If branches captured node by node, not in a session", "eager/captured_values.py",
             "        condition = scope.get(node.input[0]) if len(node.input) else None\n",
             "        return False\n", ("tests/test_eager_run.py",)),
    Mutation("SP2", "capture=[names] returns every value", "eager/model_runner.py",
             "    return {name: value for name, value in captured.items() if name in wanted}",
             "    return captured", ("tests/test_eager_run.py",)),
    Mutation("SP3", "values inside If/Loop/function nodes not captured", "eager/captured_values.py",
             "        assert branches is not None and rerun is not None  # (a plan with inner nodes gets both)\n",
             "        continue  # (mutated: the inner nodes' values left out)\n",
             ("tests/test_eager_run.py",)),
    Mutation("SP4", "node names of 128 bytes and more written with a one-byte length", "converter/onnx_encoding.py",
             "parts.append(NAME + (short_lengths[len(raw)] if len(raw) < 128 else length_prefix(len(raw))) + raw)",
             "parts.append(NAME + short_lengths[len(raw) % 128] + raw)", WIRE),
    Mutation("SP5", "output names of 128 bytes and more written with a one-byte length", "converter/onnx_encoding.py",
             "size = short_lengths[len(raw)] if len(raw) < 128 else length_prefix(len(raw))",
             "size = short_lengths[len(raw) % 128]", WIRE),
    Mutation("SP6", "an inlined If branch trusted when this call takes the other", "eager/captured_values.py",
             "        if self.taken(local, known) != self.last:",
             "        if False:", ("tests/test_eager_run.py",)),
    Mutation("CP1", "a loop over Python values unrolls its first item only", "dsl/frontend/static_python.py",
             "            for item in items:\n                self.scope.names[_CONTINUE] = PyValue(True)",
             "            for item in items[:1]:\n                self.scope.names[_CONTINUE] = PyValue(True)",
             CP_STATIC),
    Mutation("CP2", "a weight read from a container is a Python value, not its initializer",
             "dsl/frontend/python_values.py", "        return weight_operand(value)", "        return PyValue(value)",
             CP_WEIGHTS),
    Mutation("CP3", "a helper's positional arguments bound in reverse order", "dsl/frontend/static_python.py",
             "        bound = dict(zip(names, arguments))", "        bound = dict(zip(names, reversed(arguments)))",
             CP_STATIC),
    Mutation("CP4", "a static 'and'/'or' short-circuits the wrong way", "dsl/frontend/expressions.py",
             "                if self.truth(operand, value_node) == (op_type == \"Or\"):",
             "                if self.truth(operand, value_node) != (op_type == \"Or\"):", CP_STATIC),
    Mutation("CP5", "'is' and 'is not' swapped", "dsl/frontend/expressions.py",
             "    \"Is\": operator.is_, \"IsNot\": operator.is_not,", "    \"Is\": operator.is_not, \"IsNot\": operator.is_,",
             CP_STATIC),
    Mutation("CP6", "a constant range loop that needs its index as an int is not unrolled",
             "dsl/frontend/control_flow.py", "        except DslError:\n            del self.while_conditions[conditions:]",
             "        except ZeroDivisionError:\n            del self.while_conditions[conditions:]", CP_STATIC),
    Mutation("CP7", "a Python list grown inside an If branch decided by a tensor", "dsl/frontend/static_python.py",
             "        if depth == 0:\n            return\n        made", "        if True:\n            return\n        made",
             CP_STATIC),
    Mutation("CP8", "weights named by their last key only, not their path", "dsl/model_weights.py",
             "    return f\"{path}.{key}\" if path else str(key)", "    return str(key)", CP_WEIGHTS),
    Mutation("CP9", "Python operators only: the opset the module imports is ignored", "dsl/frontend/compiler.py",
             "        if imported is not None:", "        if False:", CP_STATIC),
    Mutation("CP10", "len() of a Split's outputs unknown", "dsl/frontend/calls.py",
             "        return number.value\n", "        return None\n", CP_STATIC),
    Mutation("CP11", "a nested @script under future annotations loses the enclosing names",
             "dsl/script_function.py", "        function.defining_locals = dict(frame.f_locals)", "        pass", CP_STATIC),
    Mutation("CP12", "a callee given None is compiled once, not for the call", "dsl/frontend/calls.py",
             "any(isinstance(o, PyValue) and o.value is None for o in passed) and _tests_none(target)):",
             "any(isinstance(o, PyValue) and o.value is None for o in passed) and False):", CP_STATIC),
    Mutation("CP13", "a failed static assert passes", "dsl/frontend/static_python.py",
             "        if self.truth(test, node.test):\n            return None",
             "        if True:\n            return None", CP_STATIC),
    Mutation("RP1", "the model's constants saved in the state_dict beside its weights", "converter/torch_module/module.py",
             "    _constants_unsaved(module, set(table.registered))\n", "", ("tests/test_torch_module.py",)),
    Mutation("RP2", "weight Constants of If/Loop/Scan bodies left inside the body", "converter/torch_module/node_forms.py",
             "    return [*ir.outer_values(bodies), *held]", "    return ir.outer_values(bodies)",
             ("tests/test_torch_module.py",)),
    Mutation("RP3", "an unknown key tied to a placed weight not recognised", "converter/torch_module/weights.py",
             "        if twin is not None:", "        if False:",
             ("tests/test_torch_module.py",)),
    Mutation("RP4", "a negative declared size kept as a size", "converter/proto_values.py",
             "        if negative:\n            warnings.warn(", "        if False:\n            warnings.warn(",
             ("tests/test_shipped_model_forms.py",)),
    Mutation("RP5", "value_info overriding a graph output's declared type", "converter/from_onnx.py",
             "            if declared is not None and value not in interface:", "            if declared is not None:",
             ("tests/test_shipped_model_forms.py",)),
    Mutation("RP6", "exponents, epsilons and bounds trained as weights", "converter/torch_module/weights.py",
             "        for value in fixed_weights(model.graph, candidates):", "        for value in ():",
             ("tests/test_shipped_model_forms.py",)),
    Mutation("RP7", "interface names Python cannot spell not mapped back", "converter/python_source/metadata.py",
             "    if renamed:\n", "    if False:\n", ("tests/test_shipped_model_forms.py",)),
    Mutation("RP8", "interface names not compared with check_metadata", "converter/compare_metadata.py",
             "    _interface_names(first.graph, second.graph)\n", "", ("tests/test_shipped_model_forms.py",)),
    Mutation("RP9", "a model without a producer written back as onnxquill's", "converter/to_onnx.py",
             'producer_name = model_ir.producer_name if model_ir is not None else "onnxquill"',
             'producer_name = (model_ir.producer_name if model_ir is not None else "") or "onnxquill"',
             ("tests/test_shipped_model_forms.py",)),
    Mutation("RP10", "what Agrippa tolerated an error by default", "dsl/markup/state.py",
             "        if self.strict:\n            raise MarkupError(message, location",
             "        if True:\n            raise MarkupError(message, location", ("tests/test_markup_tolerated.py",)),
    Mutation("RP11", "strict=True ignored", "dsl/markup/state.py",
             "        if self.strict:\n            raise MarkupError(message, location",
             "        if False:\n            raise MarkupError(message, location", ("tests/test_markup_tolerated.py",)),
    Mutation("RP12", "a markup attribute that is an input not fed as that input", "dsl/markup/nodes.py",
             "                if kind is None and op.schema is not None and name in op.input_names and name not in "
             "EDITOR_ATTRIBUTES:", "                if False:", ("tests/test_markup_tolerated.py",)),
    Mutation("RP13", "a negative size in eager.run's input check kept as a size", "eager/model_inputs.py",
             "            if dim.HasField(\"dim_value\") and dim.dim_value < 0:", "            if False:",
             ("tests/test_shipped_model_forms.py",)),
    Mutation("RP14", "an explicit older ir_version refused", "converter/to_onnx.py",
             "    if requested >= features and loads_ir_version(requested, opset):",
             "    if False:", ("tests/test_onnxscript_compat.py",)),
    Mutation("RP15", "node metadata of exporters written on one line", "converter/python_source/literals.py",
             "    if len(one_line) + indent <= _SHORT_LINE:", "    if True:", ("tests/test_exported_models.py",)),
    Mutation("RP16", "a long call written on one line", "converter/python_source/statements.py",
             "            if len(line) > _WRAP_AT and len(arguments) > 1:", "            if False:",
             ("tests/test_shipped_model_forms.py",)),
    Mutation("RP17", "value_info of values the walk never reaches not compared", "converter/compare_metadata.py",
             "else second.get(info.name)", "else None", ("tests/test_shipped_model_forms.py",)),
    Mutation("RP18", "weight Constants of function bodies left as constants", "converter/torch_module/weights.py",
             "                self._add_function_weight(function, node)", "                pass", TORCH_FUNCTIONS),
    Mutation("CK1", "the export checker records no refusal", "tests/checked_exports.py",
             "        FINDINGS.append((entry, name, refusal))", "        pass", CHECKED_EXPORTS),
    Mutation("CK2", "the export checker runs without full_check", "tests/checked_exports.py",
             "onnx.checker.check_model(proto, full_check=True)", "onnx.checker.check_model(proto, full_check=False)",
             CHECKED_EXPORTS),
    Mutation("CK3", "a facade re-exported by its package escapes the checking", "tests/checked_exports.py",
             "            if id(value) in replaced and not hasattr(value, _WRAPPED):",
             "            if False:", CHECKED_EXPORTS),
    Mutation("CK4", "the notebook kernel runs without the export checking", "tests/checked_exports.py",
             "checked.install(); ", "", ("tests/test_notebooks.py",)),
    Mutation("CK5", "inferred output types computed but not written", "converter/inferred_types.py",
             "        output.type.CopyFrom(merged)", "        pass", CHECKED_EXPORTS),
    Mutation("CK6", "Concat's rule compares the joined axis too", "dsl/shape_rules.py",
             "enumerate(zip(first, shape)) if p != axis and _differ(left, right)]",
             "enumerate(zip(first, shape)) if _differ(left, right)]", EAGER_FAILURES),
    Mutation("CK7", "Reshape's rule ignores the 0 that keeps an input size", "eager/op_failures.py",
             "            if size == 0:\n                if axis >= len(shape):",
             "            if size == -5:\n                if axis >= len(shape):", EAGER_FAILURES),
    Mutation("CK8", "a backend's reason keeps the C++ signature", "eager/op_failures.py",
             "            reason = _after_signature(reason)", "            reason = reason", EAGER_FAILURES),
    Mutation("CK9", "an eager unknown op raised without its line", "dsl/opsets.py",
             "                    error.with_location(frame_location(caller))", "                    pass",
             EAGER_FAILURES),
    Mutation("CK10", "a refused eager call reported at no line", "eager/op_call.py",
             "    raise _failure(op, operands, found, signature, backend_messages, caller_location()) from None",
             "    raise _failure(op, operands, found, signature, backend_messages, None) from None", EAGER_FAILURES),
    Mutation("CK11", "Gemm's rule ignores transB", "dsl/shape_rules_gemm_conv.py",
             "    inner_a, inner_b = (0 if trans_a else 1), (1 if trans_b else 0)",
             "    inner_a, inner_b = (0 if trans_a else 1), 0", EAGER_FAILURES),
    Mutation("EA1", "eager: a result's static sizes not checked against the annotation", "eager/results.py",
             "        elif not fits_declared(tensor.array.shape, tensor.elem_type, want):",
             "        elif False:", SHAPES),
    Mutation("EA2", "eager: a wrong result reported at the call, not the return", "eager/annotation_sites.py",
             "    if len(returns) != 1:", "    if True:", SHAPES),
    Mutation("EA3", "eager: a wrong argument reported at the call, not the argument", "eager/annotation_sites.py",
             "    if argument is None or argument.end_col_offset is None:", "    if True:", SHAPES),
    Mutation("EA4", "eager: a scripted call's argument checked as a model input", "eager/script_call.py",
             "signature if nested else None)", "None)", SHAPES),
    Mutation("EA5", "loop-carried values have no shape inside the body", "dsl/frontend/control_flow.py",
             "            ctx.shapes.set(value, shape)\n", "            ctx.shapes.set(value, None)\n", SHAPES),
    Mutation("EA6", "loop-carried shapes kept at their entry shape (no fixed point)", "dsl/frontend/control_flow.py",
             "            if agreed == shapes:", "            if True:", SHAPES),
    Mutation("EA7", "a loop's results lose the invariant shapes", "dsl/frontend/control_flow.py",
             "            self.ctx.shapes.set(output, shape)  #", "            pass  #", SHAPES),
    Mutation("TL1", "an attribute given None is kept in the compiled node", "dsl/frontend/calls.py",
             "        if isinstance(operand, PyValue) and operand.value is None:\n            return None",
             "        if False:\n            return None", TL),
    Mutation("TL2", "an attribute given None is kept eagerly", "eager/op_call.py",
             "        if any(value is None for value in kwargs.values()):", "        if False:", TL),
    Mutation("TL3", "a required attribute given None is dropped unchecked", "dsl/frontend/calls.py",
             "        if len(attributes) < len(keywords):", "        if False:", TL),
    Mutation("TL4", "an output of unknown rank is written without its shape", "converter/inferred_types.py",
             "    if all(item.type.tensor_type.HasField(\"shape\") for item in model.graph.input",
             "    if False and all(item.type.tensor_type.HasField(\"shape\") for item in model.graph.input", TL),
    Mutation("TL5", "a scripted function's own self swallows a keyword self", "dsl/script_function.py",
             "    def __call__(self, /, *args: P.args, **kwargs: P.kwargs) -> R:\n        from eager",
             "    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:\n        from eager", TL),
    Mutation("TL6", "an __array__ object is not a tensor attribute", "dsl/attribute_values.py",
             "    return hasattr(value, \"__array__\") and not isinstance(value, type)", "    return False", TL),
    Mutation("TL7", "an onnx_ir attribute object is not unwrapped", "dsl/attribute_values.py",
             "        return value.value\n    return value", "        return value\n    return value", TL),
    # ----------------------------------------------------------- the subgraph check before a walk
    Mutation("MS1", "no node is seen to hold a subgraph (the If/Loop bodies not renamed by a merge)", "dsl/ir.py",
             "    return not kinds.isdisjoint(_GRAPH_KINDS)", "    return False", MERGE),
    Mutation("LC1", "a warm session's quick input check ignores the declared sizes", "eager/model_inputs.py",
             "    return all(shape[axis] == size for axis, size in fixed)", "    return True",
             ("tests/test_eager_model_session.py",)),
    Mutation("LC2", "a warm session's quick input check ignores the dtype", "eager/model_inputs.py",
             "    if value.dtype != dtype or value.ndim != rank:", "    if value.ndim != rank:",
             ("tests/test_eager_model_session.py",)),
    Mutation("LC3", "the session cache knows a path by its name, size and time only", "eager/model_session.py",
             "stat.st_dev, stat.st_ino, stat.st_size", "stat.st_dev, stat.st_size", ("tests/test_eager_model_session.py",)),
    Mutation("LC4", "a Constant's captured value is writable (shared by every run)", "eager/captured_values.py",
             "    array.flags.writeable = False\n    return array", "    return array", ("tests/test_eager_model_session.py",)),
    Mutation("LC5", "Constant values captured first, not in execution order", "eager/captured_values.py",
             "steps.append((len(names), name, constant))", "steps.append((0, name, constant))",
             ("tests/test_eager_model_session.py",)),
    Mutation("LC6", "the inlined If run drops the Constant values", "eager/model_runner.py",
             'capture_graph(plan, results, captured, captured, "", None, None)',
             "captured.update(zip(plan.run_names[:plan.n_captured], results))", ("tests/test_eager_model_session.py",)),
    Mutation("LC7", "a Constant of any type is read from the node (float16 as float32)", "eager/captured_values.py",
             "    array = onnx.numpy_helper.to_array(tensor)", "    array = onnx.numpy_helper.to_array(tensor).astype("
             "np.float32 if tensor.data_type == onnx.TensorProto.FLOAT16 else None)", ("tests/test_eager_model_session.py",)),
    Mutation("VL1", "Conv's bias rank not checked", "dsl/shape_rules_inputs.py",
             "    if shape is not None and len(shape) != 1:\n        raise call.fail(f\"the bias",
             "    if False:\n        raise call.fail(f\"the bias", VL_INPUTS),
    Mutation("VL2", "ConvTranspose's bias counted from axis 1 without group", "dsl/shape_rules_inputs.py",
             "count = int(weight[1]) * group", "count = int(weight[1])", VL_INPUTS),
    Mutation("VL3", "a normalization's statistics sizes not compared with channels", "dsl/shape_rules_inputs.py",
             "    if _differ(shape[0], count):\n        raise call.fail(f\"the {role}",
             "    if False:\n        raise call.fail(f\"the {role}", VL_INPUTS),
    Mutation("VL4", "LayerNormalization's scale not checked against X", "dsl/shape_rules_inputs.py",
             "if shape is None or fits_into(shape, data) is None:", "if True:", VL_INPUTS),
    Mutation("VL5", "a loss's target rank not checked", "dsl/shape_rules_inputs.py",
             "if len(target) != len(scores) - 1:", "if False:", VL_INPUTS),
    Mutation("VL6", "Gemm's C broadcast both ways (not only into [M, N])", "dsl/shape_rules_inputs.py",
             "if small[axis] != 1 and _differ(small[axis], large[axis]):",
             "if 1 not in (small[axis], large[axis]) and _differ(small[axis], large[axis]):", VL_INPUTS),
    Mutation("VL7", "the input rules not asked by shape_rules.infer", "dsl/shape_rules.py",
             "    if op_type in INPUT_RULES:  # a bias", "    if False:  # a bias", VL_INPUTS + EAGER_FAILURES),
    Mutation("VL8", "float Mod with fmod=0 accepted whatever the opset", "dsl/shape_rules_inputs.py",
             "if floating is not None and not fmod:", "if False:", VL_INPUTS),
    Mutation("VL9", "the compiler does not ask the element-type rules", "dsl/frontend/builder.py",
             "            check_element_types(op.name, op.since_version, elems, attributes, location)",
             "            pass", VL_INPUTS),
    Mutation("VL10", "eager mode does not ask the element-type rules", "eager/op_call.py",
             "        check_element_types(op.name, op.since_version, [sig_elem(s) for s in signature], kwargs, location)",
             "        pass", VL_INPUTS),
    Mutation("VL11", "a convolution's strides/pads not counted against its spatial axes", "dsl/shape_rules_inputs.py",
             "if given is not None and len(given) != spatial * per_axis:", "if False:", VL_INPUTS),
    Mutation("VL12", "an Expand to a shape computed at run time loses its rank", "dsl/shape_rules.py",
             "        return [expanded_rank(data, call.shape(1))]", "        return [None]", VL_INPUTS),
    Mutation("VL15", "eager refuses a returned list of tensors at the call, not at the return", "eager/returned_lists.py",
             "    location = found[0] if found is not None else caller_location()", "    location = caller_location()",
             ("tests/test_frontend_lists_and_debugging.py",)),
    Mutation("VL16", "Range's limit of several values accepted", "dsl/shape_rules_inputs.py",
             "if shape is not None and (len(shape) > 1 or (len(shape) == 1 and _differ(shape[0], 1))):",
             "if shape is not None and len(shape) > 1:", VL_INPUTS),
    Mutation("VL17", "GatherElements/ScatterElements indices of another rank accepted", "dsl/shape_rules_inputs.py",
             "    if len(indices) != len(data):", "    if False:", VL_INPUTS),
    Mutation("VL18", "Split's sizes of rank 2 accepted", "dsl/shape_rules_inputs.py",
             "    if sizes is not None and len(sizes) != 1:", "    if False:", VL_INPUTS),
    Mutation("VL19", "RMSNormalization's scale not checked against X", "dsl/shape_rules_inputs.py",
             '    "RMSNormalization": _layer_normalization, ', "    ", VL_INPUTS),
    Mutation("VL20", "GroupNormalization's num_groups not checked against the channels", "dsl/shape_rules_inputs.py",
             "if int(groups) <= 0 or int(data[1]) % int(groups):", "if int(groups) <= 0:", VL_INPUTS),
    # ------------------------------------------------------------ dsl.dtypes: x.dtype as DType
    Mutation("DT1", "a DType equals no numpy dtype, scalar type or name", "dsl/dtypes.py",
             "            return int(self) == element_type_of(other)\n", "            return False\n",
             ("tests/test_dtypes.py", "tests/test_dtype_in_script.py")),
    Mutation("DT2", "INT64's bit width is 32", "dsl/dtypes.py",
             "    32, 8, 8, 16, 16, 32, 64, 0,", "    32, 8, 8, 16, 16, 32, 32, 0,",
             ("tests/test_dtypes.py", "tests/test_dtype_in_script.py")),
    Mutation("DT3", "BOOL counts as an integer type", "dsl/dtypes.py",
             "        return int(self) in _INTEGERS\n", "        return int(self) in _INTEGERS | {types.BOOL.enum}\n",
             ("tests/test_dtypes.py", "tests/test_dtype_in_script.py")),
    Mutation("DT4", "a DType hashes as an object, not as its int", "dsl/dtypes.py",
             "    __hash__ = int.__hash__", "    __hash__ = object.__hash__",
             ("tests/test_dtypes.py", "tests/test_dtype_in_script.py")),
    Mutation("DT5", "numpy's dtype protocol missing (no .dtype attribute)", "dsl/dtypes.py",
             "    def dtype(self) -> np.dtype:", "    def numpy_dtype(self) -> np.dtype:",
             ("tests/test_dtypes.py", "tests/test_dtype_in_script.py")),
    Mutation("DT6", "compiled x.dtype is numpy's dtype again", "dsl/frontend/tensor_properties.py",
             "        return dtype_of(elem)\n", "        return dtype_of(elem).numpy()\n",
             ("tests/test_dtype_in_script.py", "tests/test_frontend_tensor_properties.py")),
    Mutation("DT7", "eager x.dtype is numpy's dtype again", "eager/tensor.py",
             "        return dtype_of(self.elem_type)\n", "        return self.array.dtype\n",
             ("tests/test_dtype_in_script.py", "tests/test_eager_numpy_view.py")),
    Mutation("DT8", "compiled t.dtype = T of another known type passes", "dsl/frontend/statements.py",
             "        elif known != wanted:\n", "        elif False:\n", ("tests/test_dtype_in_script.py",)),
    Mutation("DT9", "eager t.dtype = T of another type passes", "eager/tensor.py",
             "        if wanted != self.elem_type:\n", "        if False:\n", ("tests/test_dtype_in_script.py",)),
    Mutation("DT10", "compiled t.dtype = T leaves an unknown type unknown", "dsl/frontend/statements.py",
             "            self.ctx.elem_types[tensor] = wanted\n", "            pass\n", ("tests/test_dtype_in_script.py",)),
    Mutation("DT11", "a helper called while compiling gives numpy arrays",
             "dsl/frontend/calls.py", "            if is_user_function(target):  # as it runs eagerly",
             "            if False:  # as it runs eagerly", ("tests/test_dtype_in_script.py",)),
    Mutation("DT12", "an eager tensor computed while compiling is no constant", "dsl/frontend/constants.py",
             "        return value\n    return np.asarray(value)\n", "        return value\n    return value\n",
             ("tests/test_dtype_in_script.py",)),
    Mutation("DT13", "a weight's eager dtype is numpy's, not a DType", "dsl/frontend/weights.py",
             "        return dtype_of(self.tensor.elem_type)\n", "        return np.asarray(self.tensor.array).dtype\n",
             ("tests/test_dtype_in_script.py",)),
    # ---------------------------------------------------------------- eager: onnx.reference only where onnxruntime lacks the op
    Mutation("EC1", "every onnxruntime refusal counts as lacking the op (onnx.reference runs what it refuses)",
             "eager/kernels.py", "    return isinstance(error, (state.Fail, state.InvalidGraph)) and _LACKS.search(str(error)) "
             "is not None", "    return True", AGREEMENT),
    Mutation("EC2", "a call onnxruntime refuses at run time is rerun in onnx.reference", "eager/kernels.py",
             "    if isinstance(kernel, (OrtKernel, ShapedKernel)) and onnxruntime_lacks(error):",
             "    if isinstance(kernel, (OrtKernel, ShapedKernel)):", AGREEMENT),
    Mutation("EC3", "NOT_IMPLEMENTED is a refusal of the call (ops onnxruntime lacks no longer run)", "eager/kernels.py",
             "    if isinstance(error, state.NotImplemented):\n        return True",
             "    if isinstance(error, state.NotImplemented):\n        return False", AGREEMENT),
    Mutation("EC4", "a refused rank-only model is the last word (no retry with the call's shapes)", "eager/kernels.py",
             "    shapes = call_shapes(spec, arrays)\n    return ShapedKernel(spec, shapes, _ort_session(spec, shapes))",
             "    raise CallRefused(_message(rank_only))", AGREEMENT),
    Mutation("EC5", "ops run in onnx.reference by policy skip onnxruntime's verdict", "eager/kernels.py",
             'return ReferenceKernel(spec, f"onnx.reference preferred: {preferred}", ort_kernel)',
             'return ReferenceKernel(spec, f"onnx.reference preferred: {preferred}")', AGREEMENT),
    Mutation("EC6", "eager.profile_model binds its inputs unchecked", "eager/model_profile.py",
             "    bind_inputs(names, inputs, {v.name: v.type for v in graph.input}, env)",
             "    env.update(inputs if isinstance(inputs, dict) else zip(names, inputs))", ("tests/test_eager_profile.py",)),
    Mutation("EC7", "eager does not ask ONNX's shape inference for the compiler's words", "eager/op_call.py",
             "        found = inference_refusal(op.schema, op.default_output_count(), arrays, signature, protos)",
             "        found = None", AGREEMENT),
    Mutation("EC8", "a list given to a Loop's carried value is judged by the one-node model's guessed type",
             "eager/kernels.py", "    if _untyped_input(spec) and not onnxruntime_lacks(rank_only):",
             "    if False:", AGREEMENT),
    Mutation("EC9", "eager.run node by node reruns a node onnxruntime refused in onnx.reference", "eager/model_runner.py",
             "            fallback = runtime_fallback(kernel, run_error)",
             "            fallback = kernel.fallback() if kernel.backend == \"onnxruntime\" else None", AGREEMENT),
    Mutation("EC10", "eager.run node by node lets onnxruntime's refusal to load a node escape unnamed",
             "eager/model_runner.py", "            except CallRefused as err:  # onnxruntime has the op and refuses the node",
             "            except KernelBuildError as err:  # onnxruntime has the op and refuses the node", AGREEMENT),
    Mutation("RK1", "a reduction over run-time axes with keepdims loses an axis", "dsl/reduction_ranks.py",
             "    if keepdims:\n        return tuple(1 if size == 1 else None for size in data)\n",
             "    if False:\n        pass\n", ("tests/test_output_ranks.py",)),
    Mutation("RK2", "one run-time reduction axis keeps the rank", "dsl/reduction_ranks.py",
             "        return (None,) * (len(data) - 1)", "        return (None,) * len(data)",
             ("tests/test_output_ranks.py",)),
    Mutation("RK3", "two run-time axes are taken to be distinct", "dsl/reduction_ranks.py",
             "    if axes_count == 1:\n        return (None,) * (len(data) - 1)",
             "    if axes_count is not None:\n        return (None,) * (len(data) - axes_count)",
             ("tests/test_output_ranks.py", "tests/test_torch_lib_constructs.py")),
    Mutation("RK4", "an If on a constant condition takes the other branch", "converter/output_ranks.py",
             'wanted = "then_branch" if condition else "else_branch"',
             'wanted = "else_branch" if condition else "then_branch"', ("tests/test_output_ranks.py",)),
    Mutation("RK5", "a Range of constants is evaluated whatever its length", "converter/output_ranks.py",
             "        return delta != 0 and max(0, math.ceil((limit - start) / delta)) <= _MAX_ELEMENTS",
             "        return delta != 0", ("tests/test_output_ranks.py",)),
    Mutation("RK6", "an If whose branches differ in rank is not named", "converter/output_ranks.py",
             "    if len(set(ranks)) < 2:\n        return None", "    if True:\n        return None",
             ("tests/test_output_ranks.py",)),
    Mutation("RK7", "compiled: an input of any rank still checks the result's rank", "dsl/frontend/compiler.py",
             "OUTPUT_HINT, check_rank=ranks_fixed)", "OUTPUT_HINT, check_rank=True)", ("tests/test_annotation_ranks.py",)),
    Mutation("RK8", "eager: an input of any rank still checks the result's rank", "eager/script_call.py",
             "    check_ranks = declared_ranks is not None and (not nested or _ranks_kept(declared_ranks, bound.arguments))",
             "    check_ranks = True",
             ("tests/test_annotation_ranks.py",)),
    Mutation("RK9", "a call passing another rank gets the annotation's result rank", "dsl/frontend/static_shapes.py",
             "    if not arguments_keep_ranks(actual_shapes, formal_types):", "    if False:",
             ("tests/test_annotation_ranks.py",)),
    Mutation("RK10", "an unchecked declared rank is written into the model", "dsl/frontend/compiler.py",
             "            if isinstance(declared, ir.TensorType) and declared.shape is not None and not ranks_fixed and (",
             "            if False and (", ("tests/test_annotation_ranks.py",)),
    Mutation("RK11", "a list packs tensors of rank 2", "dsl/list_packing.py",
             "        if tensor.shape is not None and len(tensor.shape) > 1:", "        if False:",
             ("tests/test_list_packing.py",)),
    Mutation("RK12", "a list packs tensors of two element types", "dsl/list_packing.py",
             "    if len(elems) > 1:", "    if False:", ("tests/test_list_packing.py",)),
    Mutation("RK13", "eagerly a list of tensors is stacked, not packed", "eager/op_call.py",
             "        elif cls in (list, tuple) and any(is_tensor_item(item) for item in value):", "        elif False:",
             ("tests/test_list_packing.py", "tests/test_frontend_lists_and_debugging.py")),
    Mutation("RK14", "compiled: a list of numbers and tensors is a tensor at once", "dsl/frontend/expressions.py",
             "        if any(isinstance(item, AttrRef) for item in items):\n            if not any(",
             "        if True:\n            if not any(", ("tests/test_list_packing.py",)),
    Mutation("RK15", "a reduction over several run-time axes is not named", "converter/output_ranks.py",
             "        if axes is not None and len(axes) == 1 and axes[0] > 1:", "        if False:",
             ("tests/test_output_ranks.py",)),
    Mutation("RK16", "eager: a call passing another rank checks the result's rank", "eager/script_call.py",
             "(not nested or _ranks_kept(declared_ranks, bound.arguments))", "True", ("tests/test_annotation_ranks.py",)),
    Mutation("RK17", "the compiler forgets a reduction's rank over run-time axes", "dsl/shape_rules.py",
             "            return reduction_ranks.reduced_shape(data, call.shapes[1], keep,",
             "            return None and reduction_ranks.reduced_shape(data, call.shapes[1], keep,",
             ("tests/test_output_ranks.py",)),
    Mutation("RK18", "a DFT with a run-time length loses its input's rank", "converter/output_ranks.py",
             'ranked = _reduction_rank(node, constants, types) or _data_rank(node, types)',
             'ranked = _reduction_rank(node, constants, types)',
             ("tests/test_output_ranks.py",)),
    Mutation("VL21", "eager returns a list of integer tensors as is (the compiler packs it)", "eager/results.py",
             "        if is_returned_list(item):", "        if False:", ("tests/test_frontend_lists_and_debugging.py",)),
    Mutation("VL22", "eager runs a loss whose exported model does not load (target shorter than scores)",
             "eager/op_call.py", '    if op.name in MODEL_ONLY_RULES and op.domain == "":', "    if False:", VL_INPUTS),
    Mutation("VL23", "Clip's min of several values accepted", "dsl/shape_rules_inputs.py",
             '    _scalars(call, ((1, "min"), (2, "max")))', "    pass", VL_INPUTS),
    Mutation("VL24", "TopK's K of rank 0 accepted", "dsl/shape_rules_inputs.py",
             "if count is not None and (len(count) != 1 or _differ(count[0], 1)):",
             "if count is not None and len(count) == 1 and _differ(count[0], 1):", VL_INPUTS),
    Mutation("VL25", "Pad's pads not counted against the input's rank", "dsl/shape_rules_inputs.py",
             "and not axes_given and _differ(pads[-1], 2 * len(data)):", "and not axes_given and False:", VL_INPUTS),
    Mutation("VL26", "OneHot's values not required to hold two values", "dsl/shape_rules_inputs.py",
             "if values is not None and (len(values) != 1 or _differ(values[0], 2)):",
             "if values is not None and len(values) != 1:", VL_INPUTS),
    Mutation("CS1", "nodes holding equal attributes decode to one shared list", "converter/proto_attributes.py",
             "    if kind in _LISTS:\n        value = value[:]", "    if kind in _LISTS:\n        value = value",
             ("tests/test_proto_attributes.py",)),
    Mutation("CS2", "an attribute tensor kept in external data is held unread", "converter/proto_attributes.py",
             "(proto.type == 4 and proto.t.data_location == _EXTERNAL)", "False", ("tests/test_proto_attributes.py",)),
    Mutation("CS3", "the writer drops the attributes a node holds unread", "converter/onnx_encoding.py",
             "parts.append(held_fields(held) or _held_attribute_fields(node, context))", "pass",
             ("tests/test_proto_attributes.py",)),
    Mutation("CS4", "asking a held node for its subgraphs decodes its attributes", "dsl/ir.py",
             "    if node.unread_attributes is not None:\n        return\n", "",
             ("tests/test_proto_attributes.py",)),
    Mutation("CS5", "initializers encoded as bytes lose their doc strings", "converter/value_encoding.py",
             "        if tensor.doc_string:\n            body += node_wire.string_field(_TENSOR_DOC_STRING",
             "        if False:\n            body += node_wire.string_field(_TENSOR_DOC_STRING",
             ("tests/test_value_encoding.py",)),
    Mutation("CS6", "initializers encoded as bytes take the first shape written", "converter/value_encoding.py",
             "        dims = shapes.get(array.shape)\n", "        dims = next(iter(shapes.values()), None)\n",
             ("tests/test_value_encoding.py",)),
    Mutation("SP7", "a captured Constant gets the first Constant's value", "eager/captured_values.py",
             "slots.append(self.n_captured + number)", "slots.append(self.n_captured)",
             ("tests/test_eager_run.py",)),
    Mutation("SP8", "captured Constants listed after the fetched values", "eager/captured_values.py",
             "            order.append(name)\n            slots.append(self.n_captured + number)\n",
             "",
             ("tests/test_eager_run.py",)),
]

def _copy_tree(destination: Path) -> Path:
    ignore = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".*_cache", ".hypothesis", "*.egg-info", "build")
    tree = destination / "tree"
    shutil.copytree(ROOT, tree, ignore=ignore)
    return tree


def _run_tests(tree: Path, tests: tuple[str, ...]) -> tuple[int, str, float]:
    present = [t for t in tests if (tree / t).exists()]
    missing = sorted(set(tests) - set(present))
    if missing:
        return 4, f"test files not found: {missing}", 0.0
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--timeout=300", *present]
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    started = time.perf_counter()
    try:
        result = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return 1, "the test subset ran past 900 s", time.perf_counter() - started
    lines = (result.stdout + result.stderr).strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))][:1]
    return result.returncode, " ".join([*failed, lines[-1] if lines else ""]), time.perf_counter() - started


def _apply(tree: Path, mutation: Mutation) -> str | None:
    """Write the mutated file; the original text, or None when the target is missing or not unique."""
    path = tree / mutation.path
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    if text.count(mutation.old) != 1:
        return None
    path.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")
    return text


def _outcome(code: int) -> str:
    if code == 0:
        return "SURVIVED"
    if code == 1:
        return "killed"
    return "killed (error)"  # 2: collection error or interrupted; 3: internal error; 4: usage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="run these mutation keys only")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only is None or m.key in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.key:4} {m.path:38} {m.what}")
        return 0
    rows: list[tuple[str, str, str, str, float]] = []
    with tempfile.TemporaryDirectory(prefix="onnxquill-mutations-") as folder:
        tree = _copy_tree(Path(folder))
        for tests in sorted({m.tests for m in chosen}):
            code, last, seconds = _run_tests(tree, tests)
            print(f"baseline {' '.join(Path(t).stem for t in tests)}: {last} ({seconds:.0f} s)", flush=True)
            if code != 0:
                print("the unmutated tests fail: fix them before judging mutations", file=sys.stderr)
                return 2
        for mutation in chosen:
            original = _apply(tree, mutation)
            if original is None:
                rows.append((mutation.key, mutation.what, "target not found", "", 0.0))
                print(f"{mutation.key}: target not found in {mutation.path}", flush=True)
                continue
            try:
                code, last, seconds = _run_tests(tree, mutation.tests)
            finally:
                (tree / mutation.path).write_text(original, encoding="utf-8")
            outcome = "test files missing" if code == 4 else _outcome(code)
            rows.append((mutation.key, mutation.what, outcome, last, seconds))
            print(f"{mutation.key}: {outcome} ({seconds:.0f} s) {last}", flush=True)
    _print_table(rows)
    bad = [r for r in rows if r[2] in ("SURVIVED", "target not found", "test files missing")]
    return 1 if bad else 0


def _print_table(rows: list[tuple[str, str, str, str, float]]) -> None:
    print()
    print(f"{'key':5}| {'mutation':56}| {'outcome':17}| {'s':>4}")
    print("-" * 90)
    for key, what, outcome, _, seconds in rows:
        print(f"{key:5}| {what:56}| {outcome:17}| {seconds:4.0f}")
    killed = sum(r[2].startswith("killed") for r in rows)
    survived = sum(r[2] == "SURVIVED" for r in rows)
    missing = sum(r[2] == "target not found" for r in rows)
    print("-" * 90)
    print(f"{len(rows)} mutations: {killed} killed, {survived} survived, {missing} target not found")


if __name__ == "__main__":
    sys.exit(main())
