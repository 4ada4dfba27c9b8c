"""dsl.safe_paths.contained and the symlink refusal of dsl.file_writing."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsl.errors import UnsafePathError
from dsl.file_writing import write_bytes, write_text
from dsl.safe_paths import contained


def test_paths_inside_the_folder_resolve_and_others_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "inside.txt").write_text("x")
    assert contained(root, root / "sub" / ".." / "inside.txt", "file") == (root / "inside.txt").resolve()
    (root / "link").symlink_to(root / "inside.txt")
    assert contained(root, root / "link", "file") == (root / "inside.txt").resolve()
    (tmp_path / "outside.txt").write_text("secret")
    (root / "out").symlink_to(tmp_path / "outside.txt")
    (root / "projectX").mkdir()
    for escaping in (root / ".." / "outside.txt", root / "out", Path("/etc/passwd"), tmp_path / "projectX"):
        with pytest.raises(UnsafePathError) as caught:
            contained(root, escaping, "the file")
        assert "secret" not in str(caught.value) and caught.value.hint


def test_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(UnsafePathError):
        contained(tmp_path, tmp_path / "a", "file")


@pytest.mark.parametrize("dangling", [False, True])
def test_writers_refuse_a_symlink_and_leave_its_target_alone(tmp_path: Path, dangling: bool) -> None:
    target = tmp_path / "target.txt"
    if not dangling:
        target.write_text("untouched")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    for write in (lambda: write_text(link, "new"), lambda: write_bytes(link, b"new")):
        with pytest.raises(UnsafePathError):
            write()
    assert (target.read_text() == "untouched") if not dangling else not target.exists()
    write_text(tmp_path / "plain.txt", "new")  # an ordinary file is still written
    assert (tmp_path / "plain.txt").read_text() == "new"
