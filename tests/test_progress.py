"""Progress bars show to a person watching (a terminal, a notebook), never in CI logs."""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Iterator

import pytest

from dsl import progress as progress_module
from dsl.progress import Progress, person_watching, progress, working


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


def test_work_without_steps_shows_its_time(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm", reason="bars need tqdm, the notebooks extra")
    _on(terminal, monkeypatch)
    with working("merging the models", delay=0.05, interval=0.05):
        time.sleep(0.4)
    assert "merging the models: 00:00" in terminal.getvalue()
    quick = _Terminal()
    monkeypatch.setattr("sys.stderr", quick)
    with working("merging the models", delay=5.0):
        pass
    assert quick.getvalue() == ""
    monkeypatch.setenv("CI", "true")
    with working("merging the models", delay=0.0, interval=0.01):
        time.sleep(0.1)
    assert quick.getvalue() == ""


def test_eager_run_node_by_node_counts_its_nodes(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm", reason="bars need tqdm, the notebooks extra")
    import numpy as np
    import onnx.helper as oh

    import eager
    from eager import model_runner

    _on(terminal, monkeypatch)
    seen = []

    @contextlib.contextmanager
    def recorded(*args: object, **options: object) -> Iterator[Progress]:
        with progress(*args, **{**options, "delay": 0.0}) as bar:  # type: ignore[arg-type]
            seen.append(bar)
            yield bar

    monkeypatch.setattr(model_runner, "progress", recorded)
    nodes = [oh.make_node("Relu", ["x"], ["a"]), oh.make_node("Neg", ["a"], ["b"]), oh.make_node("Abs", ["b"], ["y"])]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", 1, [2])], [oh.make_tensor_value_info("y", 1, [2])])
    x = np.array([-1.0, 2.0], np.float32)
    (y,) = eager.run(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]), [x], node_by_node=True)
    np.testing.assert_array_equal(y, np.abs(-np.maximum(x, 0)))
    assert "eager.run, node by node" in terminal.getvalue()
    assert [(bar.bar.n, bar.bar.total) for bar in seen] == [(3, 3)]


def test_blocks_of_work_share_one_watching_thread(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    # A block enters itself in the watcher's list (it would cost a thread each, 57 µs, a
    # good part of merging two small models); works at once, from several threads, each
    # get their bar, closed when the block ends.
    import threading

    pytest.importorskip("tqdm", reason="bars need tqdm, the notebooks extra")
    _on(terminal, monkeypatch)
    with working("warming up", delay=5.0):
        pass
    threads = threading.active_count()
    for _ in range(50):
        with working("quick work", delay=5.0):
            pass
    assert threading.active_count() == threads
    assert progress_module.WATCHER.active == 0

    def other() -> None:
        with working("the other work", delay=0.02, interval=0.02):
            time.sleep(0.3)

    helper = threading.Thread(target=other)
    with working("this work", delay=0.02, interval=0.02):
        helper.start()
        time.sleep(0.3)
        helper.join()
    drawn = terminal.getvalue()
    assert "this work: 00:00" in drawn and "the other work: 00:00" in drawn
    assert "quick work" not in drawn
    assert progress_module.WATCHER.active == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_starts_its_own_watcher(terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    # A child forked while the watcher's lock was held (the thread drawing) has no thread
    # to release it: it starts over, or its first block of work would wait forever.
    _on(terminal, monkeypatch)
    with working("in the parent", delay=5.0):
        pass
    import threading

    lock, held, release = progress_module.WATCHER._changed, threading.Event(), threading.Event()

    def drawing() -> None:  # (the watching thread, as it holds the lock while it draws)
        with lock:
            held.set()
            release.wait(10.0)

    holder = threading.Thread(target=drawing)
    holder.start()
    held.wait(10.0)
    child = os.fork()
    if child == 0:  # (the child: exits with 0 once its block ran)
        try:
            with working("in the child", delay=5.0):
                pass
        finally:
            os._exit(0)
    release.set()
    holder.join()
    deadline, ended, status = time.monotonic() + 10.0, 0, -1
    while not ended and time.monotonic() < deadline:
        ended, status = os.waitpid(child, os.WNOHANG)  # ((0, 0) while it runs)
        time.sleep(0.01)
    if not ended:
        os.kill(child, 9)
        os.waitpid(child, 0)
    assert ended and status == 0, "the forked child's block of work never ended"
