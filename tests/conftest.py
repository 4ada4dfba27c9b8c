"""Test-suite settings shared by every module.

Hypothesis runs derandomized (its examples are a function of the test alone), so the
suite gives the same verdict on every run and machine, and a failure found once is
found again; ``HYPOTHESIS_PROFILE=explore`` searches with fresh random examples.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests import checked_exports

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "invalid_export(reason): the test exports an invalid model on purpose")
    checked_exports.install()


@pytest.fixture(autouse=True)
def _exports_pass_the_checker(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test (at teardown) whose exported model or function onnx.checker refuses."""
    checked_exports.FINDINGS.clear()
    checked_exports.INPUT_REFUSALS.clear()
    checked_exports.LATEST_INPUT["refused"] = False
    checked_exports.RUNNING["test"] = request.node.nodeid
    yield
    found = list(checked_exports.FINDINGS)
    checked_exports.FINDINGS.clear()
    if found and request.node.get_closest_marker("invalid_export") is None:
        pytest.fail("onnx.checker refuses what the test exported:\n" + "\n".join(
            f"{entry} -> {name!r}: {refusal}" for entry, name, refusal in found), pytrace=False)
