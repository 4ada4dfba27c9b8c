"""Every notebook in notebooks/ runs top to bottom without a cell error.

The kernel is this interpreter, through a kernel spec written to a temporary folder, so
the test needs no ``python -m ipykernel install`` on a fresh machine and runs the
notebooks against the same installation as the rest of the suite.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbclient
import nbformat
import pytest

from tests.checked_exports import LOG_VARIABLE, kernel_argv

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL_NAME = "onnxquill-test-python"
# What an executed notebook must show beyond running: its plots as images, the graph viewer
# inline (converter.show's view as a cell's value: an IFrame of the page on 127.0.0.1), and
# profiles: the tables eager.profile / eager.profile_model print, and a plot of their rows.
SHOWS = {
    "train_in_torch.ipynb": {"plot"},
    "see_and_profile.ipynb": {"plot", "viewer", "profile table", "model profile table", "profile plot"},
}
# The header of a profile's per-line table (eager.profile_report), and the row only a profile
# of a whole model in onnxruntime has.
LINE_TABLE_HEADER = re.compile(r"^source line +calls +total +mean +share +source$", re.MULTILINE)
OUTSIDE_KERNELS_ROW = re.compile(r"^\(onnxruntime outside kernels\) +\d+ ", re.MULTILINE)


@pytest.fixture()
def kernel_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    spec_folder = tmp_path / "kernels" / KERNEL_NAME
    spec_folder.mkdir(parents=True)
    spec = {
        "argv": kernel_argv(),  # (ipykernel's launcher, with the exports checked as in this run)
        "display_name": "Python (onnxquill tests)",
        "language": "python",
    }
    (spec_folder / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv(LOG_VARIABLE, str(tmp_path / "exports.jsonl"))
    # The kernel imports dsl from the checkout even when the package is not installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return KERNEL_NAME


def test_there_is_a_notebook() -> None:
    assert NOTEBOOKS, "notebooks/ should hold the tutorial"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, kernel_name: str, tmp_path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        kernel_name=kernel_name,
        timeout=120,
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors
    log = tmp_path / "exports.jsonl"  # (each export of the kernel and onnx.checker's verdict)
    exports = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert exports, "the notebook exported nothing through the checked back end"
    assert [e for e in exports if e["refusal"]] == []
    assert SHOWS.get(path.name, set()) <= _shown(notebook), path.name


def _shown(notebook: nbformat.NotebookNode) -> set[str]:
    """What the outputs of an executed notebook hold: "plot" (a PNG image), "viewer" (the
    view's IFrame), "profile table" (a printed per-line profile table), "model profile table"
    (one of a whole model in onnxruntime), "profile plot" (a PNG drawn by a cell that reads
    a profile's ``by_line`` rows)."""
    found = set()
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            if output.get("output_type") == "display_data" and data.get("image/png"):
                found.add("plot")
                if ".by_line" in cell.source:
                    found.add("profile plot")
            if '<iframe src="http://127.0.0.1:' in data.get("text/html", ""):
                found.add("viewer")
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            if LINE_TABLE_HEADER.search(text):
                found.add("profile table")
                if OUTSIDE_KERNELS_ROW.search(text):
                    found.add("model profile table")
    return found
