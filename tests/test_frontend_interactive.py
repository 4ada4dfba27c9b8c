"""@script where Python keeps no file: the python prompt (driven through a pseudo-terminal),
``python -c``, and stdin piped in (where the text is gone, and the error says what to do).

The oracle is numpy in the same session, and onnxruntime running the exported model.
"""

from __future__ import annotations

import os
import pathlib
import select
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

DEFINITION = [
    "from typing import Annotated",
    "import numpy as np, onnxruntime",
    "from dsl import FLOAT, Tensor, script, opset18 as op",
    "@script()",
    'def scaled_relu(x: Annotated[Tensor, FLOAT["N"]], alpha: float = 2.0) -> Annotated[Tensor, FLOAT["N"]]:',
    "    y = op.Relu(x)",
    "    return y * alpha",
    "",
]
CHECKS = [
    "x = np.array([-1.0, 0.5, 3.0], np.float32)",
    'print("EAGER", np.allclose(scaled_relu(x), np.maximum(x, 0) * 2))',
    "model = scaled_relu.to_model_proto()",
    'session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])',
    'print("MODEL", np.allclose(session.run(None, {"x": x})[0], np.maximum(x, 0) * 2))',
    'print("OPS", *[n.op_type for n in model.graph.node])',
]


def _environment(home: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    # HOME: the prompt reads and writes ~/.python_history; keep the user's out of it
    return {**env, "PYTHONPATH": str(ROOT), "HOME": str(home), "TERM": "dumb", "PYTHON_BASIC_REPL": "1"}


def _drive_prompt(lines: list[str], env: dict[str, str], timeout: float = 120.0) -> str:
    """Type ``lines`` at a real ``python`` prompt on a pseudo-terminal; everything it printed."""
    pty = pytest.importorskip("pty", reason="pseudo-terminals are POSIX only")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the plain interactive interpreter
        os.execve(sys.executable, [sys.executable, "-q"], env)
    output = bytearray()
    deadline = time.monotonic() + timeout

    def read_until(marker: bytes) -> None:
        while marker not in output and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                output.extend(chunk)

    try:
        read_until(b">>> ")
        for line in lines:
            os.write(fd, line.encode() + b"\n")
            time.sleep(0.05)  # one line at a time, as typed
        os.write(fd, b"exit()\n")
        read_until(b"\x00never")  # to the end of the session
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return output.decode(errors="replace").replace("\r", "")


def _readline_available() -> bool:
    try:
        import readline  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _readline_available(), reason="this Python has no readline: the prompt keeps no history")
def test_script_typed_at_the_python_prompt_runs_eagerly_and_exports(tmp_path: pathlib.Path) -> None:
    printed = _drive_prompt(DEFINITION + CHECKS, _environment(tmp_path))
    assert "EAGER True" in printed, printed
    assert "MODEL True" in printed, printed
    assert "OPS Relu Mul" in printed or "OPS Relu Constant Mul" in printed, printed
    assert "Error" not in printed, printed


@pytest.mark.skipif(not _readline_available(), reason="this Python has no readline: the prompt keeps no history")
def test_each_definition_at_the_prompt_compiles_from_its_own_text(tmp_path: pathlib.Path) -> None:
    """A name defined twice: the first function, kept under another name, is still compiled
    from its own lines, not from the newer definition of the same name."""
    redefined = [line.replace("op.Relu(x)", "op.Abs(x)") for line in DEFINITION[3:]]
    printed = _drive_prompt(
        [*DEFINITION, "first = scaled_relu", *redefined,
         'print("FIRST", *[n.op_type for n in first.to_model_proto().graph.node])',
         'print("SECOND", *[n.op_type for n in scaled_relu.to_model_proto().graph.node])'],
        _environment(tmp_path),
    )
    assert "FIRST Relu" in printed and "SECOND Abs" in printed, printed


def test_python_c_command(tmp_path: pathlib.Path) -> None:
    code = "\n".join(DEFINITION + CHECKS)
    result = subprocess.run([sys.executable, "-c", code], env=_environment(tmp_path), capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "EAGER True" in result.stdout and "MODEL True" in result.stdout


def test_piped_stdin_runs_eagerly_and_says_what_to_do_when_compiled(tmp_path: pathlib.Path) -> None:
    code = "\n".join([*DEFINITION, *CHECKS[:2], "from dsl import SourceUnavailableError", "try:",
                      "    scaled_relu.to_model_proto()", "except SourceUnavailableError as error:",
                      '    print("HINT", error.hint)', ""])
    result = subprocess.run([sys.executable, "-"], input=code, env=_environment(tmp_path), capture_output=True,
                            text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "EAGER True" in result.stdout
    assert "HINT" in result.stdout and "define it in a file" in result.stdout
