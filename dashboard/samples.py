"""The rows a split job's parts explain, kept once for them all (issue 44).

A curve's part needs the rows it explains (the ICE/ICI sample) and its feature's column over
every row (the grid); a PFI part needs its sample of the selected rows alone. Read from the
whole data set, either would have every worker on another machine fetch it whole through the
broker. So a split job keeps each sample once, as a result of its own (``sample``: the sampled
rows' model inputs and target; at 100 features and 4,000 rows about 3 MB), computed by the job
from the data set it holds before it sends the parts (``TaskSpec.first``). A part then reads
the sample (and a curve's part one column, by row groups), and its numbers are those of the
call on the whole data: ``compute.feature_profile(column=...)`` on the sample, and
``permutation_block`` on the sampled rows, whose permutations are those of the call that
drew them (:func:`compute.permutation_rows`). A part whose sample was evicted computes it
again from the data set; a task explaining every row has no sample and reads the data set.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import compute
from compute.sampling import sample_rows

from .planning import SEED, Split, Task, TaskSpec, select_rows
from .store import ModelEntry, Workspace


def sample_task(ws: Workspace, entry: ModelEntry, params: dict, draw: str) -> Task | None:
    """The sample the parts of a task read: ``draw`` "profile" (the curves' rows: ``n_obs``
    of every row, seeded by ``seed``) or "pfi" (``n_obs`` of the rows ``condition`` and
    ``excluded`` select, PFI's seed); None when the task explains every row (no sample)."""
    n_obs = params.get("n_obs")
    if n_obs is None:
        return None
    own: dict = {"draw": draw, "n_obs": int(n_obs)}
    if draw == "profile":
        own["seed"] = int(params["seed"])
    else:
        own.update(seed=SEED, condition=params["condition"], excluded=list(params["excluded"]))
    return Task(SAMPLE.kind, SAMPLE.key(SAMPLE.kind, ws, entry, **own), entry.name, own)


def feature_blocks(spec: TaskSpec, part_kind: str, ws: Workspace, task: Task, size: int, **key) -> Split:
    """A permutation task (PFI, cs-PFI) as parts of ``size`` features each (``part_kind``,
    keyed by ``spec`` with ``key`` added), each on the same rows with the random streams its
    features have in the whole call, reading their sample (PFI's, kept by the job first);
    the join is the task naming its parts' keys."""
    entry = ws.model(task.model)
    features = list(entry.features)
    sample = sample_task(ws, entry, task.params, "pfi")
    named = {"sample": sample.to_dict()} if sample is not None else {}
    parts = []
    for start in range(0, len(features), size):
        block = features[start : start + size]
        part_key = spec.key(part_kind, ws, entry, of=task.key, features=[str(f) for f in block], **key)
        params = {**task.params, "features": block, "streams": list(range(start, start + len(block))), **named}
        parts.append(Task(part_kind, part_key, task.model, params))
    join = Task(task.kind, task.key, task.model, {**task.params, "parts": [t.key for t in parts]}, task.also)
    return Split([sample, *parts] if sample is not None else parts, join)


def positions(data: pd.DataFrame, params: dict) -> np.ndarray:
    """Positions in the data set of a sample's rows, in the order the call on the whole data
    explains them."""
    n_obs = params["n_obs"]
    if params["draw"] == "profile":  # as compute.feature_profile(n_obs=, random_state=seed) draws them
        return sample_rows(len(data), n_obs, np.random.default_rng(params["seed"]))
    inside = np.flatnonzero(select_rows(data, params["condition"], params["excluded"]).to_numpy())
    return inside[compute.permutation_rows(inside.size, n_obs, params["seed"])]


def frame(ws: Workspace, model: str, data: pd.DataFrame, params: dict) -> pd.DataFrame:
    """The sampled rows: the model's inputs and the target, their labels kept."""
    columns = list(dict.fromkeys([*ws.model(model).features, ws.target]))
    return data.iloc[positions(data, params)][columns]


def _derive(store, ws: Workspace, task: Task, data: pd.DataFrame) -> bool:
    store.put(task.key, frame(ws, task.model, data, task.params))
    return True


def _execute(job, task: Task, model) -> None:
    _derive(job.store, job.ws, task, job.data)


def reads_own_rows(part: dict) -> bool:
    """Whether a part of a ``reads_rows`` spec reads its own rows alone: the sample it names,
    its row range (``params["rows"]``: a part of the prediction pass) or its columns
    (``params["columns"]``: the what-if grids of a block of features), not the data set (a
    part explaining every row reads it whole)."""
    return bool(part["params"].get("sample") or part["params"].get("rows") or part["params"].get("columns"))


def reads_sample(part: dict) -> bool:
    """Whether a part reads a sample (``params["sample"]``): it can start only once the job
    has kept the samples."""
    return bool(part["params"].get("sample"))


def read(job, part: Task) -> pd.DataFrame | None:
    """The sample a part names (``params["sample"]``, a sample task), None when it names none;
    computed from the data set again when the cache no longer holds it."""
    named = part.params.get("sample")
    if not named:
        return None
    task = Task.from_dict(named)
    found = job.store.get(task.key)
    if not isinstance(found, pd.DataFrame):
        found = frame(job.ws, task.model, job.data, task.params)
        job.store.put(task.key, found)
    return found


SAMPLE = TaskSpec(
    "sample",
    execute=_execute,
    derive=_derive,  # no model: the rows alone
    label="the sampled rows",
    cost=lambda ws, task, data: [1],
    first=True,  # the parts read it: the job keeps it before it sends them
)
