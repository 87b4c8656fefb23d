"""The model's output on every row: the performance view's predictions (``predictions``),
split with workers into one part per row group of the stored data set (``predictions_part``,
each reading only its rows), and the output range the curves and the what-if read off them
(:func:`known_output_range`)."""

from __future__ import annotations

import compute

from . import row_groups
from .planning import SEED, Split, Task, TaskSpec
from .store import ModelEntry, Workspace


def every_row_key(ws: Workspace, entry: ModelEntry) -> str:
    """The cache key of a model's predictions on every row (as the planner plans them)."""
    return PREDICTIONS.key(PREDICTIONS.kind, ws, entry, seed=SEED)


def _predictions_split(ws, task: Task) -> Split | None:
    """With workers: one part per row group of the stored data set (``predictions_part``,
    :data:`dashboard.row_groups.ROW_GROUP_ROWS` rows each), each reading only its rows and
    keeping its predictions (about 1 MB at most); the task then joins them in row order,
    the same numbers as one pass. A data set of one group, or a record that does not say
    its rows, is one part."""
    n = int(ws.n_rows)
    if task.params.get("parts") or n <= row_groups.ROW_GROUP_ROWS:
        return None
    entry = ws.model(task.model)
    parts = [
        Task(
            PREDICTIONS_PART.kind,
            PREDICTIONS_PART.key(PREDICTIONS_PART.kind, ws, entry, of=task.key, rows=[a, b]),
            task.model,
            {"rows": [a, b]},
        )
        for a, b in ((a, min(a + row_groups.ROW_GROUP_ROWS, n)) for a in range(0, n, row_groups.ROW_GROUP_ROWS))
    ]
    return Split(parts, Task(task.kind, task.key, task.model, {"parts": [t.key for t in parts]}))


def _predictions_execute(job, task: Task, model) -> None:
    """One pass over every row, or the join of a split job's parts (in row order)."""
    keys = task.params.get("parts")
    if not keys:
        job.say(f"{task.model}: predictions on every row", 0)
        job.store.put(task.key, compute.predict_rows(model, job.X(task.model), output=job.ws.output))
        return
    job.say(f"{task.model}: predictions on every row (joining {len(keys)} parts)", 0)
    found = [job.store.get(key) for key in keys]
    if any(part is None for part in found):
        raise compute.ModelError("A part of the predictions was lost from the cache; run it again.")
    job.store.put(task.key, compute.Predictions.concat(found, rows=job.data.index))


def _predictions_part_execute(job, task: Task, model) -> None:
    """Rows ``[a, b)``: read from the row groups holding them alone, predicted."""
    a, b = task.params["rows"]
    job.say(f"{task.model}: predictions on rows {a:,}-{b:,}", 0)
    X = job.rows((a, b), list(job.ws.model(task.model).features))
    job.store.put(task.key, compute.predict_rows(model, X, output=job.ws.output))


PREDICTIONS = TaskSpec(
    "predictions",
    lambda state, ws: {},
    models="all",
    label="predictions on every row",
    split=_predictions_split,
    execute=_predictions_execute,
    cost=lambda ws, task, data: [1] if task.params.get("parts") else [len(data)],
    first=True,  # the curves' output range is read off it
)
PREDICTIONS_PART = TaskSpec(
    "predictions_part",
    execute=_predictions_part_execute,
    label="predictions on a block of rows",
    reads_rows=True,
    cost=lambda ws, task, data: [task.params["rows"][1] - task.params["rows"][0]],
)


def known_output_range(job, every_row: str | None, n_rows: int) -> tuple[float, float] | None:
    """The output range off the cached predictions on every row (key ``every_row``), or None:
    not cached, other rows, or constant (the caller's own pass then says so)."""
    found = job.store.get(every_row) if every_row else None
    try:
        return compute.output_range_of(found) if found is not None and len(found.rows) == n_rows else None
    except compute.InputError:
        return None
