"""XML markup (Agrippa's ``.agr`` format) as a second front end into the same IR as ``@script``.

A project is a directory with one architecture file (``.agr``/``.xml``), optional
weights (``weights.npz``; Agrippa's ``weights.pkl`` is still read, safely) and an
optional ``meta.json`` (``producer``, ``graph_name``).  :func:`export` writes an ONNX
file, :func:`to_model` returns the :class:`dsl.ir.Model` every back end reads (ONNX,
Python source, eager).

>>> from dsl.markup import export
>>> export("my-project", "model.onnx", bindings={"n": 4})   # doctest: +SKIP

Where this front end deliberately differs from Agrippa (whose behaviour was a bug or
silent):

* every problem is a :class:`dsl.errors.DslError` with file:line:column (unknown tags
  and attributes, duplicate output names, undefined names and variables, bad
  ``init``/``init_args``, an imported block without ``name``, import cycles, several
  architecture files that no other file imports and no ``index``, a stored weight
  whose shape differs from its ``dim``); nothing falls back to N(0, 1) or re-initialises
  a weight silently (a weight missing from the weights file is a ``MarkupWarning``);
  what Agrippa accepted and what does not change the computed model (an unknown or
  misspelt attribute of a tag such as ``<output dims=...>``, the layout Agrippa's
  editor writes, a block ``<export>`` of a name nothing defines) is a
  ``MarkupWarning`` at file:line:col, an error under ``strict=True``; an attribute
  that is an input in the project's opset (ReduceSum's ``axes``) becomes that input,
  with a warning; ``lenient=True`` makes an attribute the op does not have and
  contradicted dims warnings too;
* any ONNX op, with attributes read and checked against the op's schema; every element
  type; declared ``dim`` attributes are checked against ONNX shape inference;
* ``expr(...)`` is real arithmetic with Python's precedence and results (``^`` is
  ``**``), bound names may be used bare or as ``var(name)``;
* the model outputs are named as written in ``<export from>`` even after a repeated
  block (Agrippa named them after the last copy, ``y$4``);
* parameters of an imported file are prefixed ``name$`` like its values (Agrippa lost
  the prefix, so two imports of one file shared "shared" parameters); Agrippa's
  ``weights.pkl`` is still read under Agrippa's names, with numpy arrays or torch
  tensors in it;
* an imported block may hold ``<import from>`` tags that bind the file's own imports
  in order, and may carry ``rep``/``stretch`` (Agrippa ignored both there);
* ``rep`` together with ``stretch`` on one block is an error (Agrippa ignored ``rep``);
* the default initialiser of a vector uses std ``1/sqrt(n)`` (Agrippa: ``sqrt(n)``);
* ``<model opset="18">`` picks the opset (default 13, what Agrippa wrote); ``domain``
  on a node uses another operator domain; ``src=""`` omits an optional input;
* a frozen parameter initialised with zeros/ones/constant always takes its value from
  the markup, so editing ``init_args`` takes effect (other weights load from the file);
* ``meta.json`` fills ``producer``/``graph_name`` only when the caller left them at
  their defaults (in Agrippa the file overrode the arguments);
* a project from anywhere is safe to compile: ``src``, ``meta.json``, the weights and
  the architecture file must lie inside the project folder (symlinks resolved), nothing
  is written through a symlink, and ``rep``/``stretch`` (multiplied when nested),
  parameter sizes and pickled lists are bounded by :mod:`dsl.limits` before the work.
"""

from __future__ import annotations

from dsl.markup.export import compile_project, export, to_model, to_model_proto
from dsl.markup.state import CompiledMarkup
from dsl.markup.trained import find_params, save_weights

__all__ = ["export", "compile_project", "to_model", "to_model_proto", "CompiledMarkup", "save_weights", "find_params"]
