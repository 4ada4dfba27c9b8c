"""dsl.collection_pause: compiling and model reading pause the cyclic collector, and it resumes only
when the last pause on any thread ends, and only if it ran before the first began."""

from __future__ import annotations

import gc
import threading

from dsl import FLOAT, script
from dsl.collection_pause import collection_paused


def test_overlapping_pauses_resume_collection_when_the_last_one_ends() -> None:
    assert gc.isenabled()
    first_inside, second_may_end, first_ended = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collection_paused():
            first_inside.set()
            second_may_end.wait(5)
        seen["after first"] = gc.isenabled()
        first_ended.set()

    thread = threading.Thread(target=first)
    thread.start()
    first_inside.wait(5)
    with collection_paused():
        seen["inside"] = gc.isenabled()
        second_may_end.set()
        first_ended.wait(5)
        seen["second still inside"] = gc.isenabled()
    thread.join(5)
    assert seen == {"inside": False, "after first": False, "second still inside": False}
    assert gc.isenabled()


def test_a_collector_disabled_by_the_program_stays_disabled() -> None:
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_compiling_leaves_collection_as_it_was() -> None:
    @script()
    def double(x: FLOAT["N"]) -> FLOAT["N"]:
        return x + x

    assert gc.isenabled()
    assert double.function.nodes[0].op_type == "Add"
    assert gc.isenabled()


def test_reading_a_model_leaves_collection_as_it_was() -> None:
    import onnx.helper as oh

    from converter.from_onnx import from_proto

    graph = oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "g",
                          [oh.make_tensor_value_info("x", 1, [2])], [oh.make_tensor_value_info("y", 1, [2])])
    assert gc.isenabled()
    assert from_proto(oh.make_model(graph)).graph.nodes[0].op_type == "Relu"
    assert gc.isenabled()
