"""How much work an action does, counted instead of timed, so scaling tests are exact.

Timings on a shared CI machine wander by 2-10x; the number of bytecode instructions and
builtin calls an action executes does not.  A pass that walks a list inside a loop over
the same list executes a number of instructions that grows with the square of the size,
so comparing counts at two sizes catches the quadratic algorithms a timing test was
meant to catch, deterministically (work inside one C call, such as ``list.index``, is
counted once: keep such calls out of loops).  Speed itself is measured by the scripts in
``bench/``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def work_done(action: Callable[[], Any]) -> int:
    """The number of bytecode instructions and builtin calls ``action()`` executes."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        elif event == "opcode":
            count += 1
        return trace

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "c_call":
            count += 1

    previous_trace, previous_profile = sys.gettrace(), sys.getprofile()
    sys.settrace(trace)
    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(previous_profile)
        sys.settrace(previous_trace)
    return count


def assert_linear(action_for: Callable[[int], Callable[[], Any]], small: int, large: int, slack: float = 1.1) -> None:
    """``action_for(n)()`` does at most ``slack`` times proportionally more work at
    ``large`` than at ``small`` (the actions are built outside the count)."""
    small_action, large_action = action_for(small), action_for(large)
    per_small, per_large = work_done(small_action) / small, work_done(large_action) / large
    assert per_large <= per_small * slack, (
        f"{per_small:.1f} instructions per unit at {small}, {per_large:.1f} at {large}: "
        "the work grows faster than the size"
    )
