"""Test-suite settings shared by every module.

Hypothesis runs derandomized (its examples are a function of the test alone), so the
suite gives the same verdict on every run and machine, and a failure found once is
found again; ``HYPOTHESIS_PROFILE=explore`` searches with fresh random examples.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


_RELEASES = ("onnx", "onnxruntime", "numpy", "torch", "ml_dtypes", "hypothesis")


def tested_with() -> str:
    """The Python and package releases a verdict was reached with (printed by .ci/run too)."""
    found = []
    for name in _RELEASES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return f"tested with: Python {platform.python_version()}, " + ", ".join(found)


def pytest_report_header() -> str:
    return tested_with()
