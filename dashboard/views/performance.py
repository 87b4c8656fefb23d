"""How good each model is, and where: its error on the subgroup, the rest and all rows.

PFI (Casalicchio et al. 2018, Eq. 8) is an increase of the model's error; this view shows
the error itself, under PFI's loss (``compute.model_performance``: on the same rows it is
PFI's reference error) and the usual metrics, with a calibration curve and a confusion
matrix at a threshold the user sets (classifiers) or predicted against observed
(regressors), and the residuals or predicted probabilities against the chosen feature.
One prediction pass per model over every row (``compute.predict_rows``), cached; the
subgroup, the threshold and the feature only regroup those predictions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from dash import dcc, html

import compute
from compute.losses import LOSS_LABELS
from compute.validation import is_real

from .. import components, figures, planning, predictions
from .base import Control, View, csv_download, data_role_note, empty

TABLE = "performance-table"
FIT_GRAPH = "performance-fit-graph"
FEATURE_GRAPH = "performance-feature-graph"
CONFUSION = "performance-confusion"
THRESHOLD = "performance-threshold"
THRESHOLD_ROW = "performance-threshold-row"
INFO = "performance-info"
MAX_POINTS = 2_000  # points per scatter (a seeded sample above that)
# the model's output on every row (one pass, in row-group parts with workers): dashboard/predictions.py
TASK, PART = predictions.PREDICTIONS, predictions.PREDICTIONS_PART
KIND = TASK.kind


def groups(inp) -> list[tuple[str, np.ndarray]]:
    """(label, boolean mask over the data) of the rows to score: the subgroup, the rest and
    all rows (excluded observations left out of each), or all rows without a subgroup."""
    data, state = inp.data, inp.state
    kept = planning.select_rows(data, "", state.get("exclude")).to_numpy()
    if not state.get("subgroup"):
        return [("all rows", kept)]
    inside = planning.select_rows(data, state["subgroup"]).to_numpy()
    return [("subgroup", inside & kept), ("rest", ~inside & kept), ("all rows", kept)]


def verdicts(inp) -> tuple[dict, compute.ModelComparison | None]:
    """Each model's skill against the best constant prediction under PFI's loss, and which
    model is best (paired on the same rows), on the rows looked at: the subgroup, or all
    rows, excluded observations left out (the first of :func:`groups`)."""
    preds = inp.results(KIND)
    if not preds:
        return {}, None
    y = inp.data[inp.ws.target]
    _, mask = groups(inp)[0]
    skills = {}
    for model, pred in preds.items():
        try:
            skills[model] = compute.model_skill(pred, y, mask=mask, loss=inp.ws.loss)
        except compute.InputError:  # a target constant on these rows, a custom loss: no verdict
            continue
    if len(skills) < 2:
        return skills, None
    return skills, compute.compare_models({m: preds[m] for m in skills}, y, mask=mask, loss=inp.ws.loss)


def bins(n_rows: int) -> int:
    """Calibration bins for ``n_rows`` rows: about 20 rows a bin, 3 to 10 bins."""
    return int(np.clip(n_rows // 20, 3, 10))


def threshold_of(value) -> float:
    """The threshold control's value (from the browser): a number in [0, 1], else 0.5."""
    return float(value) if is_real(value) and 0.0 <= float(value) <= 1.0 else 0.5


def metrics_table(inp) -> pd.DataFrame:
    """One row per model and group of rows: rows, PFI's error and the usual metrics."""
    y = inp.data[inp.ws.target]
    records = []
    for model, pred in inp.results(KIND).items():
        for label, mask in groups(inp):
            if not mask.any():
                continue
            perf = compute.model_performance(pred, y, mask=mask, loss=inp.ws.loss)
            name = LOSS_LABELS.get(perf.loss, perf.loss)
            others = {k: v for k, v in perf.metrics.items() if k != name}  # PFI's loss is shown once
            records.append(
                {
                    "model": model,
                    "rows": label,
                    "count": perf.n_rows,
                    f"{name} (PFI's loss)": perf.model_error,
                    **others,
                }
            )
    return pd.DataFrame.from_records(records).set_index(["model", "rows"])


def _sample(mask: np.ndarray) -> np.ndarray:
    """Positions of at most MAX_POINTS rows of ``mask`` (seeded, so a redraw shows the same)."""
    where = np.flatnonzero(mask)
    if len(where) <= MAX_POINTS:
        return where
    return np.sort(np.random.default_rng(planning.SEED).choice(where, MAX_POINTS, replace=False))


def render(ctx, inp, controls) -> dict:
    preds = inp.results(KIND)
    if not preds:
        return _waiting("Waiting for the predictions…")
    model = inp.state["model"] if inp.state["model"] in preds else next(iter(preds))
    pred = preds[model]
    feature = inp.label(inp.feature)  # as people read it (its label); the data's column is inp.feature
    chosen = groups(inp)
    selected = chosen[0][1]
    rows, cols = figures.table_data(metrics_table(inp), digits=3)
    threshold = threshold_of(controls.get("threshold"))
    x = inp.data[inp.feature].to_numpy()
    if pred.is_classifier:
        fit, by_feature = _probability_charts(inp, preds, model, chosen)
        matrix = _confusion(inp, pred, model, chosen, threshold)
    else:
        fit, by_feature = _regression_charts(inp, pred, model, chosen)
        matrix = {"confusion": [], "confusion_columns": [], "threshold_style": {"display": "none"}, "info": ""}
    drawn = selected if pred.is_classifier else np.logical_or.reduce([mask for _, mask in chosen[:2]])
    if not pd.notna(x[np.asarray(drawn, bool)]).any():  # an empty chart would read as "no effect"
        by_feature = empty(
            f"{feature} is missing on every row of {inp.selection}: there is nothing to plot against it. "
            "Choose another feature for this chart."
        )
    note = data_role_note(inp.ws, "performance")
    info = f"{note} {matrix['info']}".strip() if note else matrix["info"]
    return {
        "data": rows,
        "columns": cols,
        "fit": fit,
        "by_feature": by_feature,
        "confusion": matrix["confusion"],
        "confusion_columns": matrix["confusion_columns"],
        "threshold_style": matrix["threshold_style"],
        "info": info,
    }


def _waiting(message: str) -> dict:
    """Every output while the predictions are computed: empty charts and tables, no
    threshold."""
    return {
        "data": [],
        "columns": [],
        "fit": empty(message),
        "by_feature": empty(message),
        "confusion": [],
        "confusion_columns": [],
        "threshold_style": {"display": "none"},
        "info": "",
    }


def _by_feature_axis(inp) -> tuple[str, bool]:
    """The chosen feature as people read it, and whether its values are categories."""
    return inp.label(inp.feature), not pd.api.types.is_numeric_dtype(inp.data[inp.feature].dtype)


def _probability_charts(inp, preds: dict, model, chosen: list) -> tuple:
    """A classifier's charts: every model's calibration curve (subgroup solid, rest dashed)
    and the chosen model's predicted probability against the feature on the rows looked at,
    by the actual class; a message in each when the model gives no probabilities."""
    pred = preds[model]
    feature, categorical = _by_feature_axis(inp)
    if not pred.has_proba:
        return (
            empty(f"{model} gives no probabilities, so there is no calibration curve."),
            empty(f"{model} gives no probabilities to plot against {feature}."),
        )
    y = inp.data[inp.ws.target]
    label = inp.class_label(figures.level_label(pred.output))
    curves = []
    for k, (name, p) in enumerate(preds.items()):
        color = figures.MODEL_COLORS[k % len(figures.MODEL_COLORS)]
        for (part, mask), dash in zip(chosen[:2], ("solid", "dash")):
            if mask.any():
                curve = compute.calibration_curve(p, y, mask=mask, n_bins=bins(int(mask.sum())))
                curves.append((f"{name}: {part}" if len(chosen) > 1 else str(name), curve, color, dash))
    fit = figures.calibration_figure(
        curves,
        output=label,
        title=f"Calibration: predicted probability against the share that is {label}",
        subtitle="subgroup: solid, rest: dashed" if len(chosen) > 1 else inp.selection,
    )
    x = inp.data[inp.feature].to_numpy()
    at = _sample(chosen[0][1])
    actual = pred.positives(y)[at]
    by_feature = figures.scatter_figure(
        [
            (f"actually {label}", x[at][actual], pred.value[at][actual], figures.POSITIVE_COLOR),
            (f"actually not {label}", x[at][~actual], pred.value[at][~actual], figures.CURVE_COLOR),
        ],
        title=f"Predicted probability of {label} by {feature}",
        subtitle=f"{model}, {inp.selection}",
        x_title=str(feature),
        y_title=f"predicted probability of {label}",
        categorical=categorical,
        y_percent=True,
    )
    return fit, by_feature


def _confusion(inp, pred, model, chosen: list, threshold: float) -> dict:
    """A classifier's confusion matrix on the rows looked at (the first of :func:`groups`)
    at ``threshold``: its table and columns, the threshold control's style (shown only for
    probabilities) and the sentence saying the rule and the share classified right."""
    selected_label, selected = chosen[0]
    label = inp.class_label(figures.level_label(pred.output))
    matrix = compute.confusion_matrix(pred, inp.data[inp.ws.target], mask=selected, threshold=threshold)
    total = max(int(matrix.to_numpy().sum()), 1)
    shown = matrix.map(lambda n: f"{n:,} ({n / total:.0%})")
    shown.columns = [f"predicted {_class_text(inp, c)}" for c in shown.columns]
    shown.index = [_class_text(inp, c) for c in shown.index]
    confusion, confusion_columns = figures.table_data(shown, index_name="actual")
    rule = (
        f"{label} is predicted when its probability is at least the threshold of {threshold:.2f}"
        if pred.has_proba
        else f"{model} predicts labels"
    )
    accuracy = compute.confusion_accuracy(matrix)
    info = (
        f"Confusion matrix of {model} on the {selected_label} ({total:,} rows): {rule}; "
        f"{accuracy:.1%} of these rows are then classified right."
    )
    threshold_style: dict = {} if pred.has_proba else {"display": "none"}
    return {
        "confusion": confusion,
        "confusion_columns": confusion_columns,
        "threshold_style": threshold_style,
        "info": info,
    }


def _regression_charts(inp, pred, model, chosen: list) -> tuple:
    """A regressor's charts: predicted against observed and the residuals against the
    feature, a sample of the subgroup's and the rest's rows in their colours (all rows in
    PI's "all" colour)."""
    feature, categorical = _by_feature_axis(inp)
    y = inp.data[inp.ws.target]
    x = inp.data[inp.feature].to_numpy()
    both = f"{model}, subgroup and rest" if len(chosen) > 1 else f"{model}, {inp.selection}"
    residual = pred.residuals(y)
    colors = figures.GROUP_COLORS if len(chosen) > 1 else (figures.ALL_COLOR,)  # all rows: as PI's "all"
    parts = [(part, _sample(mask), color) for (part, mask), color in zip(chosen[:2], colors)]
    target = str(inp.ws.target)
    fit = figures.scatter_figure(
        [(part, y.to_numpy(float)[at], pred.raw[at], color) for part, at, color in parts],
        title=f"Predicted against observed {target}",
        subtitle=both,
        x_title=f"observed {target}",
        y_title=f"predicted {target}",
        diagonal=True,
    )
    by_feature = figures.scatter_figure(
        [(part, x[at], residual[at], color) for part, at, color in parts],
        title=f"Residuals (observed − predicted) by {feature}",
        subtitle=both,
        x_title=str(feature),
        y_title=f"residual of {target}",
        zero_line=True,
        categorical=categorical,
    )
    return fit, by_feature


def _class_text(inp, value) -> str:
    """A confusion matrix's class as people read it: its label ("not churned" for the rest
    of a one-against-the-rest matrix)."""
    text = str(value)
    if text.startswith("not ") and inp.class_label(text[4:]) != text[4:]:
        return f"not {inp.class_label(text[4:])}"
    return inp.class_label(value)


def export_csv(ctx, inp):
    if not inp.results(KIND):
        return None
    return csv_download(metrics_table(inp), "performance.csv")


EXPORT = "performance-export"


def library(inp) -> dict:
    """Each model's metrics per group of rows (``compute.model_performance``: its
    ``accuracy`` is the table's, the most probable class right) and, for a classifier, the
    share classified right when the explained class is predicted at the default threshold
    (``compute.confusion_accuracy``, under its own name: for several classes it is that
    class against the rest, not the table's accuracy, which it overwrote)."""
    if not inp.results(KIND):
        return {}
    frame = metrics_table(inp)
    found: dict = {str(c): frame[c] for c in frame.columns if pd.api.types.is_float_dtype(frame[c])}
    preds = inp.results(KIND)
    pred = preds.get(inp.state["model"]) or next(iter(preds.values()))
    if pred.is_classifier:
        y, selected = inp.data[inp.ws.target], groups(inp)[0][1]
        matrix = compute.confusion_matrix(pred, y, mask=selected, threshold=threshold_of(None))
        label = figures.level_label(pred.output)
        found[f"accuracy at the threshold ({label} or not)"] = compute.confusion_accuracy(matrix)
    return found


VIEW = View(
    name="performance",
    section="overview",
    order=5,
    title="How good is each model, and where?",
    question="How good is each model, on the selected rows and on the rest?",
    method=(
        "The error under the loss PFI uses (a feature's PFI is how much this error grows when the feature is "
        "shuffled) and the usual metrics, from one prediction per row; the subgroup, feature and threshold "
        "change no model call."
    ),
    outputs={
        "data": (TABLE, "data"),
        "columns": (TABLE, "columns"),
        "fit": (FIT_GRAPH, "figure"),
        "by_feature": (FEATURE_GRAPH, "figure"),
        "confusion": (CONFUSION, "data"),
        "confusion_columns": (CONFUSION, "columns"),
        "threshold_style": (THRESHOLD_ROW, "style"),
        "info": (INFO, "children"),
    },
    render=render,
    body=lambda: [
        components.table(TABLE),
        html.Div(
            [
                components.graph(FIT_GRAPH, height=None, filename="calibration"),
                components.graph(FEATURE_GRAPH, height=None, filename="by-feature"),
            ],
            className="pair",
        ),
        html.Div(
            [
                html.Label("Threshold for the confusion matrix", htmlFor=THRESHOLD),
                dcc.Slider(
                    id=THRESHOLD, min=0, max=1, step=0.05, value=0.5, marks={0: "0", 0.5: "0.5", 1: "1"}, tooltip={}
                ),
            ],
            id=THRESHOLD_ROW,
            className="threshold",
        ),
        components.table(CONFUSION),
        html.Div(id=INFO, className="help"),
        html.Div([html.Button("Export CSV", id=EXPORT, className="button small")], className="panel-foot"),
    ],
    tasks=(TASK,),
    parts=(PART,),
    wide=True,
    controls={"threshold": Control(THRESHOLD, "value", 0.5)},
    exports={EXPORT: export_csv},
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "obs"}),
    library=library,
)
