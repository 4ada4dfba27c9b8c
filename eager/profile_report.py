"""The rows and the printed table of a profile: per op type and per source line.

Both profilers (:func:`eager.profile` for eager calls, :func:`eager.profile_model` for a
whole model in onnxruntime) add up times under keys and hand them to
:func:`make_report`, which turns them into :class:`ProfileRow` lists sorted by time
(the slowest first) with each row's share of the total.  Rows are plain dataclasses, so
a notebook plots them without pandas (``[row.total_s for row in report.by_line]``) or
makes a frame of them (``pandas.DataFrame(report.records("line"))``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

__all__ = ["ProfileRow", "ProfileReport", "TimeTally", "make_report"]


@dataclass(frozen=True)
class ProfileRow:
    """One op type or one source line: how often it ran and how long it took.

    ``key`` is the op type (``"MatMul"``) or ``"file:line"``; ``source`` is the line's
    text for a line row; ``share`` is the fraction of the profile's total time.

    >>> ProfileRow("MatMul", calls=4, total_s=0.02, mean_s=0.005, share=0.5).mean_s
    0.005
    """

    key: str
    calls: int
    total_s: float
    mean_s: float
    share: float
    file: str = ""
    line: int = 0
    source: str = ""


@dataclass
class TimeTally:
    """Calls and seconds added up under one key while profiling (a line's file, number and text kept)."""

    calls: int = 0
    total_s: float = 0.0
    file: str = ""
    line: int = 0
    source: str = ""


@dataclass(frozen=True)
class ProfileReport:
    """A profile: rows per op type and per source line, and the wall time they describe.

    ``wall_s`` is the measured time of the runs profiled (the eager calls made in the
    ``with`` block, or the ``runs`` model runs); the rows of ``by_line`` add up to it,
    and those of ``by_op`` to the part of it spent in ops.

    >>> report = make_report({"Add": TimeTally(2, 0.004)}, {}, wall_s=0.004, runs=1)
    >>> report.by_op[0].key, report.by_op[0].share
    ('Add', 1.0)
    """

    by_op: list[ProfileRow]
    by_line: list[ProfileRow]
    wall_s: float
    runs: int
    notes: list[str] = field(default_factory=list)

    def records(self, kind: str = "line") -> list[dict[str, object]]:
        """The rows of ``by_line`` (``kind="line"``) or ``by_op`` (``"op"``) as plain dicts."""
        rows = self.by_line if kind == "line" else self.by_op
        return [asdict(row) for row in rows]

    def table(self, limit: int = 15) -> str:
        """Both tables as text, the ``limit`` slowest rows of each."""
        parts = [f"profile of {self.runs} run(s), wall time {_seconds(self.wall_s)}"]
        parts += [f"note: {note}" for note in self.notes]
        parts.append(_table("op type", self.by_op, limit))
        parts.append(_table("source line", self.by_line, limit))
        return "\n\n".join(parts)

    def __str__(self) -> str:
        return self.table()


def make_report(
    by_op: dict[str, TimeTally], by_line: dict[str, TimeTally], wall_s: float, runs: int,
    notes: Iterable[str] = (),
) -> ProfileReport:
    """Rows sorted by total time, the slowest first, shares taken of each table's total."""
    return ProfileReport(_rows(by_op), _rows(by_line), wall_s, runs, list(notes))


def _rows(tallies: dict[str, TimeTally]) -> list[ProfileRow]:
    total = sum(tally.total_s for tally in tallies.values())
    rows = [
        ProfileRow(key, tally.calls, tally.total_s, tally.total_s / tally.calls if tally.calls else 0.0,
                   tally.total_s / total if total > 0 else 0.0, tally.file, tally.line, tally.source)
        for key, tally in tallies.items()
    ]
    rows.sort(key=lambda row: row.total_s, reverse=True)
    return rows


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.3f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3f} ms"
    return f"{value * 1e6:.1f} us"


def _table(title: str, rows: list[ProfileRow], limit: int) -> str:
    width = min(max([len(title), *(len(row.key) for row in rows[:limit])]), 60)
    lines = [f"{title:<{width}}  {'calls':>7}  {'total':>11}  {'mean':>11}  {'share':>6}  source"]
    for row in rows[:limit]:
        key = row.key if len(row.key) <= width else "..." + row.key[-(width - 3):]
        lines.append(f"{key:<{width}}  {row.calls:>7}  {_seconds(row.total_s):>11}  {_seconds(row.mean_s):>11}  "
                     f"{row.share:>6.1%}  {row.source}".rstrip())
    if len(rows) > limit:
        rest = rows[limit:]
        lines.append(f"({len(rest)} more rows, {sum(row.share for row in rest):.1%} of the time)")
    return "\n".join(lines)
