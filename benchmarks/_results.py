"""Result files of a benchmark run: ``benchmarks/results/<suite>.json``, rendered by the docs.

A suite makes one :class:`ResultFile`, prints its tables and notes through it (as before, to
stdout) and writes it at the end. The file carries what a reader needs to judge the numbers:
the date, the machine (CPU model, cores, load average before and after), the Python and
numpy versions, the git commit and whether the tree had uncommitted changes, and the
command line. ``docs/gen_benchmarks.py`` renders each file into a page of the site.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._table import print_table

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "benchmarks" / "results"
"""Where the result files live (committed: the docs render them)."""


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str:
    """Git's output, unstripped: a porcelain status line starts with a space."""
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


def _git_state() -> dict[str, Any]:
    """The commit measured, whether the tree differed from it (result files aside) and the
    paths that differed, so a reader can judge whether they touch what was measured."""
    try:
        commit = _git("rev-parse", "HEAD").strip()
        status = _git("status", "--porcelain", "--", ".", ":!benchmarks/results")
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "changed": []}
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    return {"commit": commit, "dirty": bool(changed), "changed": changed}


def _cell(value: object) -> object:
    """A table cell as JSON holds it: numbers stay numbers (numpy's too), the rest is text."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float, str)):
        return value
    return str(value)


@dataclass
class ResultFile:
    """The tables and notes of one suite's run, written to ``RESULTS/<suite>.json``."""

    suite: str
    quick: bool
    started: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))
    load_before: float = field(default_factory=lambda: os.getloadavg()[0])
    git: dict[str, Any] = field(default_factory=_git_state)
    """Read when the suite starts: the code it measured."""
    tables: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def table(self, title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """Print a table (``print_table``) and keep it for the file."""
        print_table(title, header, rows)
        for row in rows:
            if len(row) != len(header):
                raise ValueError(f"rows: a row has {len(row)} cells for {len(header)} columns")
        self.tables.append(
            {
                "title": title,
                "columns": list(header),
                "rows": [[_cell(c) for c in row] for row in rows],
            }
        )

    def note(self, text: str) -> None:
        """Print a line of findings and keep it for the file."""
        print(text)
        self.notes.append(text)

    def content(self) -> dict[str, Any]:
        """The file's content: the metadata, the tables and the notes."""
        return {
            "suite": self.suite,
            "quick": self.quick,
            "date": self.started.isoformat(timespec="seconds"),
            "seconds": round(
                (datetime.datetime.now(datetime.UTC) - self.started).total_seconds(), 1
            ),
            "machine": {
                "cpu": _cpu_model(),
                "cores": os.cpu_count(),
                "system": f"{platform.system()} {platform.release()}",
                "load_average_before": round(self.load_before, 2),
                "load_average_after": round(os.getloadavg()[0], 2),
            },
            "python": platform.python_version(),
            "numpy": np.__version__,
            "git": self.git,
            "command": " ".join(["python", *sys.orig_argv[1:]]),
            "tables": self.tables,
            "notes": self.notes,
        }

    def write(self, directory: Path = RESULTS) -> Path:
        """Write the file (replacing the suite's earlier one) and return its path."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.suite}.json"
        path.write_text(json.dumps(self.content(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        return path
