"""Passes: IR -> IR transformations, one module per pass, each with its own test.

Each pass is a callable object, ``pass_(function_or_model) -> PassResult(target,
modified)`` (:mod:`dsl.passes.protocol`); the facade (:mod:`dsl.script_function`)
decides which run, between the front end and the back end.

- :mod:`dsl.passes.inline`: calls of model-local functions replaced by their bodies.
- :mod:`dsl.passes.prune_loop_carried`: loop-carried values nothing reads dropped.
- :mod:`dsl.passes.prefix`: names prefixed, or renamed apart from another model's.
- :mod:`dsl.passes.merge`: two models wired into one (``converter.merge``).
- :mod:`dsl.passes.cut`: the sub-graph computing some values kept (``converter.cut``).

>>> from dsl.passes import InlinePass
>>> flat = InlinePass()(caller.function).target     # doctest: +SKIP
"""

from __future__ import annotations

from dsl.passes.cut import CutPass, cut_model
from dsl.passes.inline import InlinePass, inline_calls
from dsl.passes.merge import MergePass, merge_models
from dsl.passes.prefix import PrefixPass
from dsl.passes.protocol import Pass, PassResult, Target
from dsl.passes.prune_loop_carried import PruneLoopCarried, prune_loop_carried

__all__ = ["Pass", "PassResult", "Target", "InlinePass", "inline_calls", "PruneLoopCarried", "prune_loop_carried", "MergePass", "merge_models", "PrefixPass", "CutPass", "cut_model"]
