"""Page layout: functions that build components and compute nothing."""

from __future__ import annotations

from dash import dcc, html

from . import ids
from .components import error_line, panel
from .demos import DEMOS
from .loading import FORMATS_TEXT
from .views import SECTIONS, panels

OPERATORS = ["==", "!=", "<", "<=", ">", ">=", "between", "in", "not in", "is missing", "is not missing"]


def load_panel(config) -> html.Details:
    return html.Details(
        id=ids.LOAD_PANEL,
        children=[
            html.Summary("Load your own model and data"),
            html.Div(
                [_model_field(config), _data_field(), _choices_field(), _labels_field(), _load_buttons()],
                className="load-grid",
            ),
            dcc.Store(id=ids.MODEL_FILES, data=[]),
            dcc.Store(id=ids.DATA_FILE, data=None),
            dcc.Store(id=ids.LABELS_FILE, data=None),
            dcc.Store(id=ids.DATA_COLUMNS, data={}),
            dcc.Store(id=ids.LOAD_CLOSED),
        ],
        className="load-panel",
    )


def _model_field(config) -> html.Div:
    """The model files: the chooser, what was chosen, the skops types to accept, the formats."""
    pickle_note = (
        "Pickle/joblib files are accepted on this server (the operator trusts them)."
        if config.allow_pickle
        else "Pickle and joblib files are refused: loading them runs code from the file. "
        "Save with skops.io.dump(model, 'model.skops') or export to ONNX."
    )
    formats_note = (
        "Gradient boosting: XGBoost save_model('model.json' or '.ubj'), LightGBM booster.save_model('model.txt'), "
        "CatBoost save_model('model.cbm'). These files are data: checked, then run in an isolated process."
    )
    return html.Div(
        [
            html.Label(f"Model files ({FORMATS_TEXT})"),
            html.Button("Choose model files…", id=ids.MODEL_UPLOAD, className="button"),
            html.Div(id=ids.MODEL_FILES_INFO, className="file-info"),
            error_line(ids.MODEL_ERROR),
            html.Div(
                [
                    html.P(
                        "This skops file contains types this server does not load by itself "
                        "(they could run code). Tick only the ones you trust:"
                    ),
                    dcc.Checklist(id=ids.TYPES_CHECKLIST, options=[], value=[]),
                ],
                id=ids.TYPES_BOX,
                style={"display": "none"},
            ),
            html.P(formats_note, className="help"),
            html.P(pickle_note, className="help"),
        ],
        className="load-field",
    )


def _data_field() -> html.Div:
    """The data file, and whether the models are added to the data shown or name no inputs."""
    return html.Div(
        [
            html.Label("Data file (.csv, .parquet) with the target column"),
            html.Button("Choose data file…", id=ids.DATA_UPLOAD, className="button"),
            html.Div(id=ids.DATA_FILE_INFO, className="file-info"),
            error_line(ids.DATA_ERROR),
            dcc.Checklist(
                id=ids.ADD_TO_CURRENT,
                options=[{"label": " no data file: add the models to the data shown now", "value": "add"}],
                value=[],
            ),
            dcc.Checklist(
                id=ids.ORDER_CONFIRM,
                options=[
                    {
                        "label": " the columns are in the order the model was trained on "
                        "(asked of a model that does not name its inputs)",
                        "value": "yes",
                    }
                ],
                value=[],
            ),
        ],
        className="load-field",
    )


def _choices_field() -> html.Div:
    """The target column, the loss, the class labels and class explained, and what the rows are."""
    return html.Div(
        [
            html.Label("Target column", htmlFor=ids.TARGET_SELECT),
            dcc.Dropdown(id=ids.TARGET_SELECT, options=[], placeholder="choose the target column"),
            error_line(ids.TARGET_ERROR),
            html.Label("Loss", htmlFor=ids.LOSS_SELECT),
            dcc.Dropdown(id=ids.LOSS_SELECT, options=[], placeholder="default from the task"),
            html.Label(
                "Class labels, in the model's order (XGBoost/LightGBM classifiers)",
                htmlFor=ids.CLASS_LABELS,
            ),
            dcc.Input(
                id=ids.CLASS_LABELS,
                type="text",
                debounce=True,
                placeholder="default: 0, 1, … or the target's values sorted",
                className="text-input",
            ),
            html.Label("Class to explain (classifiers)", htmlFor=ids.OUTPUT_SELECT),
            dcc.Dropdown(id=ids.OUTPUT_SELECT, options=[], placeholder="default: the last class"),
            html.Fieldset(  # the legend names the group of radio buttons
                [
                    html.Legend("Did the models see these rows in training?"),
                    dcc.RadioItems(
                        id=ids.DATA_ROLE,
                        options=[
                            {"label": " no: held-out (test) data", "value": "held-out"},
                            {"label": " yes: the training data", "value": "training"},
                            {"label": " not sure", "value": "unknown"},
                        ],
                        value="unknown",
                        className="data-role",
                    ),
                ],
                className="field-group",
            ),
        ],
        className="load-field",
    )


def _labels_field() -> html.Div:
    """The optional labels file of feature and class names."""
    return html.Div(
        [
            html.Label("Labels (optional): a .json file of feature and class names"),
            html.Button("Choose labels file…", id=ids.LABELS_UPLOAD, className="button"),
            html.Div(id=ids.LABELS_FILE_INFO, className="file-info"),
            error_line(ids.LABELS_ERROR),
            html.P(
                'For example {"features": {"income_k": "Yearly income (k$)"}, "classes": '
                '{"1": "churned"}}: shown on the axes, tables, findings and the report; the column '
                "names stay in the link and the numbers.",
                className="help",
            ),
        ],
        className="load-field",
    )


def _load_buttons() -> html.Div:
    """Load, cancel, and the load's status line."""
    return html.Div(
        [
            html.Button("Load", id=ids.LOAD_BUTTON, className="button primary"),
            html.Button("Cancel loading", id=ids.LOAD_CANCEL, className="button", disabled=True),
            html.Div(id=ids.LOAD_STATUS, className="field-error", role="alert"),
        ],
        className="load-field",
    )


def header():
    return html.Header(
        [
            html.Div(
                [
                    html.H1("Why it performs"),
                    html.Span(
                        "model-agnostic feature importance: PFI · SFIMP · PI/ICI · ICE/PD · CIU", className="tagline"
                    ),
                    # presentation mode only (style.css): what the audience is looking at
                    html.P(id=ids.PRESENT_TITLE, className="present-title"),
                ],
                className="brand",
            ),
            html.Div(
                [
                    html.Label("Data set", htmlFor=ids.WS_SELECT),
                    dcc.Dropdown(
                        id=ids.WS_SELECT,
                        options=[{"label": v, "value": k} for k, v in DEMOS.items()],
                        clearable=False,
                        style={"minWidth": "300px"},
                    ),
                ],
                className="control",
            ),
            html.Div(
                [
                    html.Label("Model for curves and CIU", htmlFor=ids.MODEL_SELECT),
                    dcc.Dropdown(id=ids.MODEL_SELECT, options=[], clearable=False, style={"minWidth": "180px"}),
                ],
                className="control",
            ),
            html.Div(
                [
                    html.Label("Feature", htmlFor=ids.FEATURE_SELECT),
                    dcc.Dropdown(id=ids.FEATURE_SELECT, options=[], clearable=False, style={"minWidth": "180px"}),
                ],
                className="control",
            ),
            subgroup_box(),
            html.Div(
                [
                    html.Button("Download HTML report", id=ids.EXPORT_REPORT, className="button"),
                    html.Button(
                        "Presentation mode",
                        id=ids.PRESENT,
                        className="button present-toggle",
                        title="For a projector: larger type, controls and method notes folded (the URL keeps it)",
                        **{"aria-pressed": "false"},  # type: ignore[arg-type]  # a wildcard aria-* prop
                    ),
                    html.Div(id=ids.STATUS, className="status", role="status"),
                    html.Button("Retry", id=ids.RETRY, className="button", style={"display": "none"}),
                    progress_bar(),
                ],
                className="control status-bar",
            ),
        ],
        className="header toolbar",
    )


def subgroup_box():
    """The toolbar's subgroup: a condition typed in, applied or cleared, and its size."""
    return html.Div(
        [
            html.Label("Subgroup", htmlFor=ids.SUBGROUP_TEXT),
            html.Div(
                [
                    dcc.Input(
                        id=ids.SUBGROUP_TEXT,
                        type="text",
                        debounce=False,
                        n_submit=0,
                        placeholder="all rows; type a condition",
                        className="subgroup-text",
                    ),
                    html.Button("Apply", id=ids.SUBGROUP_APPLY, className="button primary"),
                    html.Button("Clear", id=ids.SUBGROUP_CLEAR, className="button"),
                ],
                className="builder",
            ),
            html.Span(id=ids.SUBGROUP_SIZE, className="subgroup-size"),
            error_line(ids.SUBGROUP_ERROR),
        ],
        className="control subgroup-control",
    )


def condition_builder():
    """The Subgroups section's condition builder (adds to the toolbar's condition)."""
    return html.Section(
        [
            html.Div(html.H3("Build a subgroup"), className="panel-header"),
            html.P(
                "Pick a column, an operator and a value: the condition is added (with “and”) to the subgroup "
                "in the toolbar, and every view follows.",
                className="help",
            ),
            html.Div(
                [
                    html.Label("Subgroup"),
                    # each control's own name for screen readers (the placeholders show it on screen)
                    html.Label("Condition column", htmlFor=ids.COND_COLUMN, className="visually-hidden"),
                    dcc.Dropdown(id=ids.COND_COLUMN, options=[], placeholder="column", style={"width": "150px"}),
                    html.Label("Condition operator", htmlFor=ids.COND_OP, className="visually-hidden"),
                    dcc.Dropdown(
                        id=ids.COND_OP, options=OPERATORS, value="==", clearable=False, style={"width": "110px"}
                    ),
                    html.Label("Condition value", htmlFor=ids.COND_VALUE, className="visually-hidden"),
                    dcc.Input(
                        id=ids.COND_VALUE,
                        type="text",
                        placeholder="value (a, b for between/in)",
                        debounce=True,
                        style={"width": "170px"},
                    ),
                    html.Button("Add condition", id=ids.COND_ADD, className="button"),
                ],
                className="builder",
            ),
        ],
        className="panel wide condition-builder",
    )


def progress_bar():
    return html.Div(
        [
            html.Progress(id=ids.PROGRESS, value="0", max="1"),
            html.Span(id=ids.PROGRESS_LABEL, className="progress-label"),
            html.Button("Cancel", id=ids.CANCEL, className="button", disabled=True),
        ],
        id=ids.PROGRESS_BOX,
        className="progress-box",
        style={"visibility": "hidden"},
    )


def views():
    """The sections as tabs, each holding its views' panels in order (the Subgroups section
    starts with the condition builder)."""
    tabs = []
    for key, label, question in SECTIONS:
        extra = [condition_builder()] if key == "subgroups" else []
        tabs.append(
            dcc.Tab(
                label=label,
                value=key,
                id=f"section-tab-{key}",
                className="section-tab",
                selected_className="section-tab selected",
                children=[
                    html.H2(question, className="section-question"),  # under the page's h1, over the panels' h3
                    html.Div([*extra, *panels(panel, key)], className="views"),
                ],
            )
        )
    return dcc.Tabs(id=ids.SECTION_TABS, value="overview", children=tabs, className="section-tabs")


def page(config) -> html.Div:
    return html.Div(
        [
            dcc.Location(id=ids.URL, refresh="callback-nav"),
            dcc.Store(id=ids.STATE),
            dcc.Store(id=ids.RESULTS),
            dcc.Store(id=ids.JOB_REQUEST),
            dcc.Store(id=ids.JOB_DONE),
            dcc.Store(id=ids.JOB_ACTIVE, data=False),
            dcc.Interval(id=ids.JOB_WATCH, interval=1500, disabled=True),
            dcc.Store(id=ids.LOADED_WS),
            dcc.Store(id=ids.MY_WORKSPACES, storage_type="session", data=[]),
            dcc.Store(id=ids.NEGATIVE),
            dcc.Store(id=ids.CLICKED_ROW),
            dcc.Store(id=ids.HOVERED_ROW),
            dcc.Download(id=ids.DOWNLOAD),
            header(),
            html.Main([load_panel(config), html.Div(id=ids.WS_NOTES, className="ws-notes"), views()]),
        ],
        id=ids.PAGE,
        className="page",
    )
