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
import os
import sys
import threading
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
    done = threading.Event()

    def tick() -> None:
        if done.wait(delay):
            return
        bar = _new_bar(None, description, "s", 0.0, False, bar_format="{desc}: {elapsed}")
        if bar is None:
            return
        while not done.wait(interval):
            bar.refresh()
        bar.close()

    thread = threading.Thread(target=tick, name=f"progress: {description}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


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
