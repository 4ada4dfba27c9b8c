"""Progress bars show to a person watching (a terminal, a notebook), never in CI logs."""

from __future__ import annotations

import io
import time

import pytest

from dsl import progress as progress_module
from dsl.progress import person_watching, progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture()
def terminal(monkeypatch: pytest.MonkeyPatch) -> _Terminal:
    # (set during the test itself: pytest's output capture replaces sys.stderr after fixtures run)
    stream = _Terminal()
    monkeypatch.delenv("CI", raising=False)
    return stream


def _on(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", terminal)


def test_a_terminal_is_watched_and_ci_is_not(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    _on(terminal, monkeypatch)
    assert person_watching()
    for value in ("true", "1", "yes"):
        monkeypatch.setenv("CI", value)
        assert not person_watching()
    monkeypatch.setenv("CI", "false")
    assert person_watching()
    monkeypatch.setattr("sys.stderr", io.StringIO())  # a log file: not a terminal
    assert not person_watching()


def test_long_work_draws_a_bar_on_a_terminal(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    _on(terminal, monkeypatch)
    pytest.importorskip("tqdm", reason="bars need tqdm, the notebooks extra")
    with progress(total=4, description="compiling the block", delay=0.05) as bar:
        time.sleep(0.1)
        for _ in range(4):
            bar.update(1)
    assert bar.shown
    assert "compiling the block" in terminal.getvalue()


def test_short_work_draws_nothing(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    _on(terminal, monkeypatch)
    pytest.importorskip("tqdm", reason="bars need tqdm, the notebooks extra")
    with progress(total=4, description="compiling the block", delay=5.0) as bar:
        bar.update(4)
    assert "compiling" not in terminal.getvalue()


def test_ci_draws_nothing_even_on_a_terminal(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    _on(terminal, monkeypatch)
    monkeypatch.setenv("CI", "true")
    with progress(total=4, description="compiling the block", delay=0.0) as bar:
        time.sleep(0.05)
        bar.update(4)
    assert not bar.shown
    assert terminal.getvalue() == ""


def test_without_tqdm_the_work_runs_silently(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    _on(terminal, monkeypatch)
    monkeypatch.setitem(__import__("sys").modules, "tqdm.std", None)  # import tqdm.std raises ImportError
    with progress(total=2, description="compiling", delay=0.0) as bar:
        bar.update(2)
    assert not bar.shown and terminal.getvalue() == ""
    assert progress_module.Progress(None).shown is False
