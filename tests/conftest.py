"""Test-suite settings shared by every module.

Hypothesis runs derandomized (its examples are a function of the test alone), so the
suite gives the same verdict on every run and machine, and a failure found once is
found again; ``HYPOTHESIS_PROFILE=explore`` searches with fresh random examples.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
