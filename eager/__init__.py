"""Eager execution: run ONNX ops, scripted functions and whole models on real arrays.

``op.Add(x, y)`` outside ``@script`` (:func:`call_op`), calling a ``@script`` function
with arrays (:func:`call_script`, which runs the Python body with :class:`EagerTensor`
values) execute one op at a time in a cached one-op onnxruntime session
(:func:`set_cache_size`, :func:`cache_info`, :func:`clear_cache`); :func:`run` runs a
whole model or function in one cached session for the model where it can
(:func:`set_model_cache_size`, :func:`model_cache_info`), node by node where it cannot.

Which backend ran: :func:`last_backend` returns a :class:`BackendReport` ``(op,
backend, reason)`` for the latest op call in this thread — ``backend`` is
``"onnxruntime"`` or ``"onnx.reference"``, and ``reason`` says why onnxruntime was not
used (its own error text, or ``"onnx.reference preferred: ..."`` for the few ops where
onnxruntime's result departs from the ONNX spec, see :mod:`eager.backend_policy`).  The
first time an op falls back, an INFO record on the ``"eager"`` logger says the same.
onnx.reference runs an op only where onnxruntime lacks it for the call's element types or
opset; a call onnxruntime refuses is an ``EagerError`` at the user's line, as the exported
model would be refused (:mod:`eager.kernels`).

Modules: ``op_call`` (argument handling, checks), ``sessions`` (the LRU cache and the
backend report), ``kernels`` (one-op models, onnxruntime sessions, reference
evaluators), ``ortvalues`` (raw buffers for bfloat16/float8/4-bit), ``values``
(numpy/torch conversion), ``tensor`` (EagerTensor), ``sequences`` (sequence values as
lists of tensors, :class:`EagerSequence`; optionals as their value or None),
``indexing``, ``control_flow`` (If/Loop/Scan/SequenceMap with ``@graph()`` bodies),
``script_call``, ``model_session`` (one session per model for ``run``), ``script_context`` (what a running body sets: the operators' opset,
whether results stay EagerTensors), ``results`` (results typed by the return
annotation, as compiled), ``model_runner``, ``call_site`` (error locations, number of
unpacked outputs), ``attributes`` (cache keys; protos by :mod:`converter.onnx_encoding`),
``numpy_view`` (numpy's array methods on EagerTensor, for inspection), ``profiling``
(:func:`profile`, per op type and source line of eager calls), ``model_profile``
(:func:`profile_model`, onnxruntime's profile of a whole model mapped to source lines),
``profile_report`` (their rows and tables).
EagerTensor operators and sequence subscripts run their ops as ``op(...)`` does, through
the runner the ``dsl`` facade installs in :mod:`dsl.hooks` (:func:`call_op`), so the
value classes never import the op runner that returns them.

>>> import numpy as np
>>> from dsl import opset18 as op
>>> op.Mul(np.array([1.0, 2.0], dtype=np.float32), 3)
array([3., 6.], dtype=float32)
"""

from __future__ import annotations

from eager.model_profile import profile_model
from eager.model_runner import RunResult, run
from eager.op_call import call_op
from eager.profile_report import ProfileReport, ProfileRow
from eager.profiling import profile
from eager.script_call import call_script
from eager.sequences import EagerSequence
from eager.sessions import (
    BackendReport,
    CacheInfo,
    cache_info,
    clear_cache,
    last_backend,
    model_cache_info,
    set_cache_size,
    set_model_cache_size,
)
from eager.tensor import EagerTensor

__all__ = [
    "call_op",
    "call_script",
    "run",
    "RunResult",
    "EagerTensor",
    "EagerSequence",
    "set_cache_size",
    "cache_info",
    "clear_cache",
    "set_model_cache_size",
    "model_cache_info",
    "CacheInfo",
    "last_backend",
    "BackendReport",
    "profile",
    "profile_model",
    "ProfileReport",
    "ProfileRow",
]

