"""One model against its data, as every door loads it (the upload form, a notebook's
objects, the command line): the task, loss and class it explains, the columns it reads, the
class labels a booster file lacks, and what the user should be told. Runs where the model
may run: inside an isolated job process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

import compute
from compute.losses import DEFAULT_LOSS

from .boosters import booster_classes
from .checks import PAGE_CONFIRM, check_model_data, infer_task
from .models import load_warnings


@dataclass(frozen=True)
class Checked:
    """What :func:`inspect_model` found: the model's task, the loss and output class to
    explain it with, the data columns it reads (in its order), the class labels given to a
    booster classifier, the notes for the user, and whether the exact tree walk computes its
    PFI (``compute.pfi_engine``: the page's PFI budget is larger then)."""

    task: str
    loss: str
    output: Any
    features: tuple
    classes: tuple
    warnings: tuple
    walked: bool = False


def inspect_model(
    model,
    data: pd.DataFrame,
    target,
    *,
    name: str,
    loss: str | None = None,
    output=None,
    labels=(),
    order_confirmed: bool = False,
    confirm_how: str = PAGE_CONFIRM,
) -> Checked:
    """Check ``model`` against ``data`` (its ``target`` column the outcome): raises a
    ``LoadError`` or ``compute.ExplainError`` naming the column, file or parameter that is
    wrong. ``loss`` and ``output``: as chosen (None: the task's default loss, the last
    class); ``labels``: class labels typed for a booster classifier whose file has none."""
    warnings: list[str] = []
    classes: tuple = ()
    if getattr(model, "needs_classes", False):  # an XGBoost/LightGBM classifier: labels not in its file
        found, note = booster_classes(model, data[target], list(labels) or None)
        model.set_classes(found)
        classes = tuple(found)
        if note:
            warnings.append(note)
    task = infer_task(model)
    loss = loss or DEFAULT_LOSS[task]
    if task == "classification" and output not in (None, ""):
        # the page offers classes as text: the model's own label with that spelling
        output = next((c for c in model.classes_ if str(c) == str(output)), output)
        output = output.item() if hasattr(output, "item") else output
    elif task == "regression":
        output = None
    output = None if output == "" else output
    X, _ = check_model_data(
        model,
        data,
        target,
        name=name,
        output=output,
        loss=loss,
        order_confirmed=order_confirmed,
        confirm_how=confirm_how,
    )
    warnings.extend(load_warnings(model))
    warnings.extend(n for n in X.attrs.get("notes", []) if n not in warnings)
    walked = compute.pfi_engine(model, X, output) == compute.TREE_WALK
    return Checked(task, loss, output, tuple(str(c) for c in X.columns), classes, tuple(warnings), walked)
