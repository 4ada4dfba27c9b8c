"""Progress bars for library work that can take long, shown only to a person watching.

A bar appears once the work has run for ``delay`` seconds (2 by default: short work
prints nothing) and only where someone watches: a terminal on stderr, or a Jupyter
kernel; never where ``CI`` is set (CI logs) and never without tqdm (the optional
``notebooks`` extra installs it; without it the work runs silently).  tqdm is imported
only when a bar may be shown.

>>> with progress(total=3, description="writing") as bar:
...     for _ in range(3):
...         bar.update(1)
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["Progress", "progress", "working", "person_watching"]

_FALSE = ("", "0", "false", "no", "off")


def person_watching() -> bool:
    """True where a progress bar reaches a person: not under CI, and in a Jupyter kernel
    or with stderr on a terminal.

    >>> import os; os.environ.get("CI") and person_watching()   # doctest: +SKIP
    False
    """
    if os.environ.get("CI", "").strip().lower() not in _FALSE:
        return False
    if _in_kernel():
        return True
    stream = sys.stderr
    return stream is not None and hasattr(stream, "isatty") and stream.isatty()


def _in_kernel() -> bool:
    shell_module = sys.modules.get("IPython")
    if shell_module is None or "ipykernel" not in sys.modules:
        return False
    shell = shell_module.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class Progress:
    """The bar of one piece of work: ``update(n)`` advances it (a no-op where none shows)."""

    __slots__ = ("bar",)

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def update(self, count: int = 1) -> None:
        """Advance the bar by ``count`` steps."""
        if self.bar is not None:
            self.bar.update(count)

    @property
    def shown(self) -> bool:
        """Whether a bar exists (it still waits ``delay`` seconds before it is drawn)."""
        return self.bar is not None


@contextlib.contextmanager
def progress(total: int | None, description: str, *, unit: str = "it", delay: float = 2.0,
             unit_scale: bool = False) -> Iterator[Progress]:
    """A :class:`Progress` for work of ``total`` steps (None: unknown), drawn after ``delay``
    seconds where :func:`person_watching`, and closed (the bar cleared) when the block ends.

    >>> with progress(total=10, description="serving model", unit="B", unit_scale=True) as bar:
    ...     bar.update(10)
    """
    bar = _new_bar(total, description, unit, delay, unit_scale) if person_watching() else None
    try:
        yield Progress(bar)
    finally:
        if bar is not None:
            bar.close()


def working(description: str, *, delay: float = 2.0, interval: float = 0.5) -> contextlib.AbstractContextManager[None]:
    """The time spent so far on work that counts no steps (a compile, a merge, a to_python of
    a big model), drawn after ``delay`` seconds where :func:`person_watching` and refreshed
    every ``interval`` seconds by a daemon thread until the block ends.

    >>> with working("merging the models"):
    ...     pass
    """
    # (Where nobody watches, the block runs under a shared no-op: a merge of two small models
    # takes tens of µs, and a generator context manager would add a few.)
    return _timer(description, delay, interval) if person_watching() else _UNWATCHED


_UNWATCHED: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


@contextlib.contextmanager
def _timer(description: str, delay: float, interval: float) -> Iterator[None]:
    work = WATCHER.begin(description, delay, interval)
    try:
        yield
    finally:
        WATCHER.end(work)


class _Work:
    """One block of :func:`working`: its bar (once drawn) and when the watcher next looks at it."""

    __slots__ = ("bar", "description", "due", "interval")

    def __init__(self, description: str, due: float, interval: float) -> None:
        self.description, self.due, self.interval = description, due, interval
        self.bar: Any = None


class Watcher:
    """The one daemon thread that draws the bars of :func:`working`: a block of work enters
    itself in a list under a lock instead of starting a thread of its own (57 µs a block,
    a good part of merging two small models); the thread starts with the first block and
    sleeps until a bar is due or needs redrawing.  ``active`` is how many blocks run.

    >>> WATCHER.active
    0
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._works: list[_Work] = []
        self._thread: threading.Thread | None = None

    def forget(self) -> None:
        """Start over with no block and no thread: what a forked child does (it has no
        watching thread, and may have copied the lock held)."""
        self.__init__()  # type: ignore[misc]

    @property
    def active(self) -> int:
        return len(self._works)

    def begin(self, description: str, delay: float, interval: float) -> _Work:
        work = _Work(description, time.monotonic() + delay, interval)
        with self._changed:
            self._works.append(work)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
                self._thread.start()
            self._changed.notify()
        return work

    def end(self, work: _Work) -> None:
        with self._changed:
            self._works.remove(work)
            if work.bar is not None:
                work.bar.close()
            self._changed.notify()

    def _run(self) -> None:
        with self._changed:
            while True:
                now = time.monotonic()
                wake = math.inf
                for work in self._works:
                    if now >= work.due:
                        if work.bar is None:
                            work.bar = _new_bar(None, work.description, "s", 0.0, False, bar_format="{desc}: {elapsed}")
                            if work.bar is None:  # (no tqdm: never drawn)
                                work.due = math.inf
                                continue
                        else:
                            work.bar.refresh()
                        work.due = now + work.interval
                    wake = min(wake, work.due)
                self._changed.wait(None if wake == math.inf else max(0.0, wake - time.monotonic()))


WATCHER = Watcher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCHER.forget)


def _new_bar(total: int | None, description: str, unit: str, delay: float, unit_scale: bool,
             bar_format: str | None = None) -> Any:
    try:
        if _in_kernel():
            try:
                import ipywidgets  # noqa: F401  (tqdm.notebook draws with it)
                from tqdm.notebook import tqdm
            except ImportError:
                from tqdm.std import tqdm
        else:
            from tqdm.std import tqdm
    except ImportError:  # the notebooks extra is not installed: no bar
        return None
    return tqdm(total=total, desc=description, unit=unit, unit_scale=unit_scale, delay=delay, leave=False,
                bar_format=bar_format)
