"""Running a command on hostile input in a child process under memory and time limits.

The tests in ``test_untrusted_*.py`` build a hostile file in a temporary folder and then
run onnxquill on it here: a fresh interpreter (so no global state of the test process
can hide or absorb an effect), an address-space limit (a memory bomb fails fast instead
of taking the machine), a CPU limit and a wall-clock timeout.  The child reports, for
each call, the exception it ended in (or its result) as JSON; the test then decides.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MEMORY_LIMIT = 3 << 30  # address space: numpy, onnx and onnxruntime load in well under this
CPU_SECONDS = 60

_PRELUDE = '''
import json
import sys
from dsl.errors import DslError

_results = []


def attempt(label, call):
    """Run ``call`` and record how it ended, whatever it raised (the test judges that)."""
    try:
        value = call()
    except BaseException as error:  # (a report, not a decision: the parent asserts the type)
        _results.append({"label": label, "type": type(error).__name__, "dsl": isinstance(error, DslError),
                         "message": str(error)[:4000], "hint": getattr(error, "hint", "") or ""})
    else:
        _results.append({"label": label, "type": None, "value": repr(value)[:400]})
'''


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def run_limited(
    code: str, cwd: Path, environment: dict[str, str] | None = None, timeout: float = 90
) -> dict[str, dict[str, Any]]:
    """Run ``code`` (which calls ``attempt(label, fn)``) in a limited child; results by label."""
    program = _PRELUDE + textwrap.dedent(code) + "\nprint('RESULTS ' + json.dumps(_results))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(environment or {})}
    completed = subprocess.run(
        [sys.executable, "-c", program],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=_limit_child,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULTS ")]
    assert completed.returncode == 0 and lines, (completed.returncode, completed.stdout[-2000:], completed.stderr[-4000:])
    return {entry["label"]: entry for entry in json.loads(lines[-1][len("RESULTS "):])}


def assert_refused(outcome: dict[str, Any], error_type: str | None = None, *, not_shown: tuple[str, ...] = ()) -> None:
    """The call ended in a DslError (of ``error_type`` if given) with a hint, showing none of ``not_shown``."""
    assert outcome["type"] is not None, f"{outcome['label']}: no error, returned {outcome.get('value')}"
    assert outcome["dsl"], f"{outcome['label']}: {outcome['type']}: {outcome['message']}"
    if error_type is not None:
        assert outcome["type"] == error_type, f"{outcome['label']}: {outcome['type']}: {outcome['message']}"
    assert outcome["hint"], f"{outcome['label']}: no hint: {outcome['message']}"
    for secret in not_shown:
        assert secret not in outcome["message"], f"{outcome['label']} shows {secret!r}: {outcome['message']}"
