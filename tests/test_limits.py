"""dsl.limits: the defaults, the environment override, the context override and its reset."""

from __future__ import annotations

import threading

import pytest

from dsl import raised_limits
from dsl.errors import DslError, LimitExceededError
from dsl.limits import Limits, check_limit, current_limits


def test_check_limit_refuses_only_above_the_limit_and_names_the_override() -> None:
    limit = Limits().loop_iterations
    check_limit("loop_iterations", limit, "a loop")
    with pytest.raises(LimitExceededError) as caught:
        check_limit("loop_iterations", limit + 1, "a loop")
    assert isinstance(caught.value, DslError)
    assert "raised_limits(loop_iterations=" in caught.value.hint and "ONNXQUILL_LOOP_ITERATIONS" in caught.value.hint


def test_the_environment_sets_a_limit_and_a_bad_value_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONNXQUILL_MARKUP_NODES", "7")
    assert current_limits().markup_nodes == 7
    assert current_limits().loop_iterations == Limits().loop_iterations
    monkeypatch.setenv("ONNXQUILL_MARKUP_NODES", "many")
    with pytest.raises(LimitExceededError, match="ONNXQUILL_MARKUP_NODES"):
        current_limits()


def test_raised_limits_applies_inside_the_block_only_and_only_to_this_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONNXQUILL_INFLATED_BYTES", "5")
    seen_by_other_thread: list[int] = []
    with raised_limits(inflated_bytes=10**12) as limits:
        assert limits.inflated_bytes == current_limits().inflated_bytes == 10**12
        worker = threading.Thread(target=lambda: seen_by_other_thread.append(current_limits().inflated_bytes))
        worker.start()
        worker.join()
        with pytest.raises(LimitExceededError):
            check_limit("inflated_bytes", 10**12 + 1, "x")
    assert current_limits().inflated_bytes == 5
    assert seen_by_other_thread == [5]


def test_raised_limits_resets_after_an_error() -> None:
    before = current_limits()
    with pytest.raises(LimitExceededError), raised_limits(tensor_bytes=1):
        check_limit("tensor_bytes", 2, "a tensor")
    assert current_limits() == before
