"""A module of test cases run in a pytest process of its own: the tree engine's booster cases
fit and call XGBoost, LightGBM and CatBoost in process, which the test process must never do
(its forked job processes would inherit the libraries' mappings and OpenMP pools; see
``tests/test_boosters.py::test_the_test_process_never_imported_a_booster_library``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def run_cases(cases: Path, at_least: int) -> str:
    """Run ``cases`` with pytest in a process of its own (one OpenMP thread); assert that it
    passed and that at least ``at_least`` of its tests ran (a module that silently collects
    fewer, or none, fails). Returns the run's output."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(cases)],
        cwd=cases.parent.parent,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed is not None and int(passed.group(1)) >= at_least, tail
    return done.stdout
