"""The tree engine's XGBoost, LightGBM and CatBoost readers (``compute/trees/boosters.py``),
run in a pytest process of their own: the cases (``tests/tree_boosters_cases.py``) fit and
call the libraries in process, which this process must never do (its forked job processes
would inherit the libraries' mappings and OpenMP pools; see
``tests/test_boosters.py::test_the_test_process_never_imported_a_booster_library``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

CASES = Path(__file__).with_name("tree_boosters_cases.py")


def test_the_booster_readers_equal_each_librarys_own_predict():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CASES)],
        cwd=CASES.parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed is not None and int(passed.group(1)) >= 60, tail
