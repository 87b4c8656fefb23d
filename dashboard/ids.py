"""Every component id of the dashboard, once (kebab-case strings)."""

URL = "url"
STATE = "state"  # dcc.Store: the drill-down state (mirrors the URL)
RESULTS = "results"  # dcc.Store: cache keys of the results the views render
JOB_REQUEST = "job-request"  # dcc.Store: the state the background job is asked to compute
JOB_DONE = "job-done"  # dcc.Store: what the last background job reported
JOB_ACTIVE = "job-active"  # dcc.Store: True while a background job runs (watchdog)
JOB_WATCH = "job-watch"  # dcc.Interval: ticks while a job runs; each tick asks whether its process lives
LOADED_WS = "loaded-ws"  # dcc.Store: workspace id produced by "Load"
MY_WORKSPACES = "my-workspaces"  # dcc.Store (browser session): ids of the data sets this tab loaded
STATUS = "status"
HOVERED_ROW = "hovered-row"  # dcc.Store: {"row", "t"} of the curve under the pointer
CLICKED_ROW = "clicked-row"  # dcc.Store: {"row", "t"} from a click on an ICI/ICE curve
NEGATIVE = "negative"  # dcc.Store: rows with a negative ICI integral (for "exclude")

# drill-down controls
WS_SELECT = "ws-select"
MODEL_SELECT = "model-select"
FEATURE_SELECT = "feature-select"
SUBGROUP_TEXT = "subgroup-text"
SUBGROUP_APPLY = "subgroup-apply"
SUBGROUP_CLEAR = "subgroup-clear"
SUBGROUP_ERROR = "subgroup-error"
SUBGROUP_SIZE = "subgroup-size"
COND_COLUMN = "cond-column"
COND_OP = "cond-op"
COND_VALUE = "cond-value"
COND_ADD = "cond-add"
REPEATS_MORE = "repeats-more"
SFIMP_RUN = "sfimp-run"  # toggles SFIMP: computed and shown, or not (later subgroups then skip it)
REPEATS_RESET = "repeats-reset"
CENTERED = "centered"
EXCLUDE_NEGATIVE = "exclude-negative"
EXCLUDE_SELECTED = "exclude-selected"
EXCLUDE_CLEAR = "exclude-clear"
EXCLUDED_INFO = "excluded-info"
OBS_INFO = "obs-info"

SECTION_TABS = "section-tabs"  # dcc.Tabs: the open section of the page
VIEW_LINK = "view-link"  # {"type": VIEW_LINK, "view": name, "section": key}: opens the section, scrolls to the view
LOAD_PANEL = "load-panel"  # html.Details: "Load your own model and data"
LOAD_CLOSED = "load-closed"  # dcc.Store: written when a load succeeds (closes the panel)

# background job
PROGRESS = "progress"
PROGRESS_LABEL = "progress-label"
PROGRESS_BOX = "progress-box"
CANCEL = "cancel"
RETRY = "retry"  # shown when a job was cancelled, died or failed

# views
PFI_INFO = "pfi-info"
SFIMP_INFO = "sfimp-info"
PFI_TABLE = "pfi-table"
PI_GRAPH = "pi-graph"
ICI_GRAPH = "ici-graph"
ICI_INFO = "ici-info"
HOVER_INFO = "hover-info"  # the hovered curve's observation values
ICE_GRAPH = "ice-graph"
CIU_GRAPH = "ciu-graph"
INFLUENCE_GRAPH = "influence-graph"
OBS_TABLE = "obs-table"
IMPACT_TABLE = "impact-table"
ALE_GRAPH = "ale-graph"
WHATIF_VALUE = "whatif-value"  # pattern-matching type: {"type", "column", "row"}, one field per feature
WHATIF_EDIT = "whatif-edit"  # dcc.Store: {"row", "edit": {column: value}, "t"} from the what-if form
WHATIF_RESET = "whatif-reset"

# export
DOWNLOAD = "download"
EXPORT_PFI = "export-pfi"
EXPORT_ICI = "export-ici"
EXPORT_CIU = "export-ciu"
EXPORT_REPORT = "export-report"

# loading your own files
MODEL_UPLOAD = "model-upload"  # button: opens the file chooser, POSTs to /upload
DATA_UPLOAD = "data-upload"
MODEL_FILES = "model-files"  # dcc.Store: [{"id", "name", "size"}] (server-side file ids)
DATA_COLUMNS = "data-columns"  # dcc.Store: per column, its kind and class options (target choices)
DATA_FILE = "data-file"  # dcc.Store: {"id", "name", "size"}
LABELS_UPLOAD = "labels-upload"  # button: an optional labels file (.json) of features and classes
LABELS_FILE = "labels-file"  # dcc.Store: {"id", "name", "size"} (a server-side file id)
LABELS_FILE_INFO = "labels-file-info"
LABELS_ERROR = "labels-error"
MODEL_FILES_INFO = "model-files-info"
DATA_FILE_INFO = "data-file-info"
MODEL_ERROR = "model-error"
DATA_ERROR = "data-error"
TARGET_SELECT = "target-select"
TARGET_ERROR = "target-error"
OUTPUT_SELECT = "output-select"
LOSS_SELECT = "loss-select"
DATA_ROLE = "data-role"  # radio: is the data held out from the models' training?
TYPES_CHECKLIST = "types-checklist"
TYPES_BOX = "types-box"
ADD_TO_CURRENT = "add-to-current"
PFI_ALL = "pfi-all"  # button: PFI on every selected row, or back to a sample within the budget
WS_NOTES = "ws-notes"  # what the load said about the data set shown (labels matched, column order, versions)
CLASS_LABELS = "class-labels"  # text: class labels of an XGBoost/LightGBM classifier, in the model's order
ORDER_CONFIRM = "order-confirm"  # checklist: the data's columns are in the order of a model that names none
LOAD_BUTTON = "load-button"
LOAD_STATUS = "load-status"
LOAD_CANCEL = "load-cancel"
SUGGESTED = "suggested-subgroup"  # pattern-matching type: {"type", "condition"}, a button per suggested subgroup
SUGGESTED_PICK = "suggested-pick"  # dcc.Store: {"condition", "t"} from the clicked suggestion
PAGE = "page"  # the page's root: its class says presentation mode
PRESENT = "present-toggle"  # the toolbar's presentation-mode button
PRESENT_TITLE = "present-title"  # presentation mode: the data set, models and rows shown
