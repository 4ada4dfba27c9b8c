"""``with eager.profile():`` — where the time of eager calls goes, per op type and per line.

Two measurements run while the block runs, and neither exists outside it (nothing on
the path of an eager call checks whether a profile is running):

* per op type: the eager op runner that ``dsl`` installs in :data:`dsl.hooks.run_op_eagerly`
  (which both ``op.X(...)`` and EagerTensor operators call) is swapped for a timing
  wrapper; an op that runs other ops (``If``/``Loop`` with ``@graph()`` bodies) counts its
  own time only, so the op rows add up to the time spent in ops;
* per source line: a ``sys.settrace`` line tracer follows the Python bodies of scripted
  functions called eagerly (every other frame is left untraced); the time between two
  events goes to the line that was running, so a line's total holds its ops, its Python
  and what it calls (a nested scripted function's lines count for themselves).  The time
  a call spends outside its body (checking arguments, typing results) goes to a row of
  its own, so the line rows add up to the wall time of the eager calls made in the block.
  An op called outside any scripted function counts for the line that called it.  The
  tracer is off while an op runs (Python runs every frame slower while one is set), so op
  times are what they are unprofiled; the Python of the bodies runs a few times slower.

Only the thread that entered the block is profiled.  A tracer already installed (a
debugger, coverage) is paused for the block and restored after it.
"""

from __future__ import annotations

import linecache
import sys
import threading
import time
from types import CodeType, FrameType, TracebackType
from typing import Any

from dsl import hooks
from dsl.errors import EagerError
from eager.call_site import user_frame
from eager.op_call import call_op
from eager.profile_report import ProfileReport, TimeTally, make_report
from eager.script_call import call_script

__all__ = ["profile"]

_CALL_SCRIPT_CODE = call_script.__code__
_clock = time.perf_counter


class profile:  # (lower case: a context manager used as a function, ``with eager.profile() as p``)
    """Profile the eager calls made in a ``with`` block; ``.report`` holds the rows after it.

    The report's ``by_op`` rows give per op type the calls, total and mean time and
    share; ``by_line`` the same per source line of the scripted functions run (the line
    text in ``source``), the slowest first.  The tables are printed when the block ends
    unless ``print_table=False``.

    >>> import numpy as np, eager
    >>> from dsl import script, FLOAT, opset18 as op
    >>> @script()
    ... def f(x: FLOAT["N"]) -> FLOAT["N"]:
    ...     return op.Relu(x) * 2.0
    >>> with eager.profile(print_table=False) as profiled:             # doctest: +SKIP
    ...     f(np.ones(4, np.float32))
    >>> [row.key for row in profiled.report.by_op]                     # doctest: +SKIP
    ['Relu', 'Mul']
    """

    _running: profile | None = None

    def __init__(self, print_table: bool = True) -> None:
        self.print_table = print_table
        self._report: ProfileReport | None = None
        self._by_op: dict[str, TimeTally] = {}
        self._by_line: dict[str, TimeTally] = {}
        self._stack: list[str] = []  # the line (or call) keys of the traced frames, innermost last
        self._since = 0.0  # when the time now running began to count for the top of the stack
        self._outer_start = 0.0
        self._wall_s = 0.0
        self._runs = 0
        self._op_children: list[float] = []  # time of the ops run inside each op running
        self._body_codes: set[CodeType] = set()
        self._thread = 0
        self._previous_hook: Any = None
        self._previous_trace: Any = None

    @property
    def report(self) -> ProfileReport:
        """The rows of the finished block (typed as always there, so a checker needs no None test)."""
        if self._report is None:
            raise EagerError("eager.profile()'s report is read before its `with` block ended",
                             hint="read `p.report` after the block: `with eager.profile() as p: ...`, then `p.report`")
        return self._report

    # ------------------------------------------------------------- the block

    def __enter__(self) -> profile:
        if profile._running is not None:
            raise EagerError("eager.profile() is already running", hint="profile one block at a time")
        profile._running = self
        self._thread = threading.get_ident()
        self._previous_hook = hooks.run_op_eagerly
        hooks.run_op_eagerly = self._timed_op
        self._previous_trace = sys.gettrace()
        sys.settrace(self._on_call)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        sys.settrace(self._previous_trace)
        hooks.run_op_eagerly = self._previous_hook
        profile._running = None
        while self._stack:  # (the block left from inside a call: close what is open)
            self._pop(_clock())
        notes = [] if self._by_line else ["no scripted function or op ran in the block"]
        self._report = make_report(self._by_op, self._by_line, self._wall_s, self._runs, notes)
        if self.print_table and kind is None:
            print(self._report.table())

    # ------------------------------------------------------------- time keeping

    def _charge(self, now: float) -> None:
        if self._stack:
            self._by_line[self._stack[-1]].total_s += now - self._since
        self._since = now

    def _push(self, key: str, now: float, count: bool = True) -> None:
        if not self._stack:
            self._outer_start = now
            self._runs += 1
        self._charge(now)
        self._stack.append(key)
        if count:
            self._by_line[key].calls += 1

    def _pop(self, now: float) -> None:
        self._charge(now)
        self._stack.pop()
        if not self._stack:
            self._wall_s += now - self._outer_start

    def _line_key(self, code: CodeType, line: int) -> str:
        key = f"{code.co_filename}:{line}"
        if key not in self._by_line:
            source = linecache.getline(code.co_filename, line).strip()
            self._by_line[key] = TimeTally(0, 0.0, code.co_filename, line, source)
        return key

    def _call_key(self, frame: FrameType) -> str:
        script_function = frame.f_locals.get("script_function")
        python_function = getattr(script_function, "python_function", None)
        code = getattr(python_function, "__code__", None)
        if code is None:
            code, name = frame.f_code, "a scripted function"
        else:
            self._body_codes.add(code)
            name = getattr(script_function, "name", code.co_name)
        key = f"{code.co_filename}:{code.co_firstlineno} (call of {name})"
        if key not in self._by_line:
            self._by_line[key] = TimeTally(0, 0.0, code.co_filename, code.co_firstlineno,
                                           f"(calling {name}: arguments in, results out)")
        return key

    # ------------------------------------------------------------- the tracer

    def _on_call(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code is _CALL_SCRIPT_CODE:
            now = _clock()
            self._push(self._call_key(frame), now)
            frame.f_trace_lines = False
            return self._on_call_event
        if code in self._body_codes and self._stack:
            # Until its first line runs, the body's time is the call's; each line event counts a line.
            self._push(self._stack[-1], _clock(), count=False)
            return self._on_body_event
        return None

    def _on_call_event(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            self._pop(_clock())
        return self._on_call_event

    def _on_body_event(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            now = _clock()
            self._charge(now)
            key = self._line_key(frame.f_code, frame.f_lineno)
            self._stack[-1] = key
            self._by_line[key].calls += 1
        elif event == "return":
            self._pop(_clock())
        return self._on_body_event

    # ------------------------------------------------------------- the op timer

    def _timed_op(self, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if threading.get_ident() != self._thread:
            return call_op(op, args, kwargs)
        outside = not self._stack  # an op called from the user's own code, not a scripted body
        if outside:
            caller = user_frame()
            if caller is not None:
                self._push(self._line_key(caller.f_code, caller.f_lineno), _clock())
        self._op_children.append(0.0)
        tracer = sys.gettrace()
        sys.settrace(None)  # (Python 3.11 runs all code slower while a tracer is set: not the op's)
        start = _clock()
        try:
            return call_op(op, args, kwargs)
        finally:
            end = _clock()
            sys.settrace(tracer)
            elapsed = end - start
            inner = self._op_children.pop()
            if self._op_children:
                self._op_children[-1] += elapsed
            name = op.name if not op.domain else f"{op.domain}::{op.name}"
            tally = self._by_op.get(name)
            if tally is None:
                tally = self._by_op[name] = TimeTally()
            tally.calls += 1
            tally.total_s += elapsed - inner
            if outside and self._stack:
                self._pop(end)
