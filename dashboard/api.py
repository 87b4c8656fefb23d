"""The Python door: ``dashboard.report(models, data, target, path)``.

The caller's objects (fitted models, a data frame) are pickled to a private file and
handed to a fresh interpreter that opens them as a data set and writes the review
(``python -m dashboard.cli --session``): nothing here imports the dashboard or runs a model,
so a notebook whose XGBoost or scikit-learn OpenMP pool is running never forks (a child
forked from a running pool hangs), and the models still run only in the job processes
that interpreter forks. This module imports nothing of the dashboard's: ``import
dashboard`` stays light."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class ReportError(ValueError):
    """The review could not be written: a missing column, a model that cannot be used, an
    object that cannot be handed over. The message says which."""


def report(
    models,
    data,
    target: str,
    path,
    *,
    json_path=None,
    loss: str | None = None,
    title: str = "",
    cache_dir=".wip-cache",
    progress: bool = True,
) -> dict:
    """Write the dashboard's one-file HTML review of ``models`` on ``data`` to ``path``.

    ``models``: one fitted model (anything with ``predict``/``predict_proba``: scikit-learn
    estimators and pipelines, the XGBoost/LightGBM/CatBoost scikit-learn wrappers) or a
    ``{name: model}`` dict; ``data``: a pandas DataFrame holding the ``target`` column. All
    sections are computed (PFI and its caveats, SFIMP, subgroups found, the curves of the
    most important feature, performance). Returns the numbers behind the report (also
    written to ``json_path`` when given): each model's PFI with its standard error and
    every view's numbers. Raises :class:`ReportError` with a one-line reason."""
    named = dict(models) if isinstance(models, Mapping) else {type(models).__name__: models}
    out = Path(path)
    with tempfile.TemporaryDirectory(prefix="wip-report-") as folder:
        session = Path(folder) / "session.pkl"
        numbers = Path(json_path) if json_path is not None else Path(folder) / "numbers.json"
        try:
            with open(os.open(session, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                pickle.dump({"models": named, "data": data, "target": target, "title": title}, handle, protocol=5)
        except Exception as exc:  # a lambda in a pipeline, an open connection: the object stays here
            raise ReportError(
                f"The models and data could not be handed to the dashboard's process ({type(exc).__name__}: {exc})."
            ) from exc
        command = [sys.executable, "-m", "dashboard.cli", "--session", str(session), "--out", str(out)]
        command += ["--json", str(numbers), "--cache-dir", str(cache_dir)] + (["--loss", loss] if loss else [])
        done = subprocess.run(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=_env())
        if progress and done.stderr:
            sys.stderr.write(done.stderr)
        if done.returncode != 0:
            reasons = [line[len("error: ") :] for line in done.stderr.splitlines() if line.startswith("error: ")]
            raise ReportError(reasons[-1] if reasons else done.stderr.strip()[-500:] or "the review failed")
        return json.loads(numbers.read_text(encoding="utf-8"))


def _env() -> dict:
    """The child finds this checkout's packages first (an editable install does too)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env
