"""The one pause of Python's cyclic garbage collector, for work that builds large IRs.

Compiling a function and reading a model allocate many small objects that all stay
alive (an ``ast``, then the IR), and each automatic collection rescans the growing heap
to free nothing.  Measured on one machine, runs interleaved: ``python
bench/compile_speed.py --sizes 2000`` took 12.4-14.6 µs per statement with collection
running and 11.2-11.3 paused; reading a chain of 20 000 nodes (``converter.from_onnx``)
3.1 µs per node against 1.9.  (Writing Python source gained nothing and does not pause.)

The collector is process-wide state, so the pause is counted across threads: the first
pause to begin records whether collection was enabled and disables it; the last to end
restores it.  A collector the program disabled itself stays disabled.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType

__all__ = ["collection_paused"]

_lock = threading.Lock()
_running = 0  # pauses in force, on every thread
_resume = False  # whether collection was enabled when the first of them began


class _Pause:
    # (A class, not a generator context manager: composition enters three pauses a call,
    # each one a lock and a counter, and the generator's frame cost more than the work.)
    __slots__ = ()

    def __enter__(self) -> None:
        global _running, _resume
        with _lock:
            if _running == 0:
                _resume = gc.isenabled()
                gc.disable()
            _running += 1

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        global _running
        with _lock:
            _running -= 1
            if _running == 0 and _resume:
                _promote_young_objects()
                gc.enable()


_PAUSE = _Pause()


def collection_paused() -> _Pause:
    """Run the body with cyclic garbage collection paused (see the module docstring).

    >>> with collection_paused():
    ...     pass
    """
    return _PAUSE


def _promote_young_objects() -> None:
    # Re-enabled, the collector would first trace every object built meanwhile (a whole
    # IR, ~0.4 µs a node) only to find it alive; freeze + unfreeze hands them to the oldest
    # generation at once (full collections still see them).  Skipped when the program
    # froze objects itself: unfreeze would release those too.
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
