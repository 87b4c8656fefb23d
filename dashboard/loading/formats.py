"""The model file formats, in one table: which suffix is which format, how it is loaded, what is
checked on the loaded object before anything calls it, and how far it is trusted.

Every door reads this table, as httpx picks a transport from one mapping: the upload (the
``/upload`` route's suffixes in :mod:`dashboard.server`, the feedback after an upload and the
load job in :mod:`dashboard.callbacks.load`, :func:`dashboard.loading.load_model`), the command
line (:mod:`dashboard.cli`) and the Python doors (``dashboard.show`` / ``dashboard.report``,
through :mod:`dashboard.doors`). A new format is a row here (and its loader).

Trust levels: :data:`SAFE` formats are read as data and checked before they run (every door
takes them); :data:`OPT_IN` formats run code when loaded (pickle, joblib): the upload and the
Python doors' server refuse them unless the operator allows pickles (``--allow-pickle``), and
on the command line they are the operator's own files, loaded with a warning
(:func:`decision`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model_trust import ModelFileError, check_model
from .boosters import BOOSTER_SUFFIXES, booster_versions, load_booster
from .errors import LoadError, Policy, file_suffix, short
from .onnx import load_onnx, onnx_versions
from .skops_files import load_skops, skops_versions, untrusted_types
from .sniff import AMBIGUOUS_SUFFIXES, suffix_by_content

SAFE = "safe"  # read as data, checked before it runs: every door loads it
OPT_IN = "pickle"  # runs the code it holds when loaded: only with the operator's opt-in, or their own file

# what a door does with a format (decision())
LOAD = "load"
REFUSE = "refuse"
OWN = "own"  # the operator's own file (the command line): loaded, with a warning

MLFLOW_SUFFIX = ".zip"  # an MLflow model folder, uploaded as a zip


@dataclass(frozen=True)
class Request:
    """What a loader is given besides the file: its format's suffix, the operator's policy, the
    skops types the user accepted, and a booster classifier's class labels."""

    suffix: str
    policy: Policy = Policy()
    accepted_types: tuple[str, ...] = ()
    classes: object = None


Loader = Callable[[str, str, Request], tuple[object, list[str]]]  # (path, label, request) -> (model, versions)


@dataclass(frozen=True)
class ModelFormat:
    """One row of the table. ``load``: (path, label, request) -> (model, the scikit-learn
    versions it records), None for an archive holding another format's file (an MLflow model:
    loaded by that file's row); ``checks``: run on the loaded object (label given) before
    anything calls it (formats checked before their library reads them have none);
    ``versions``: (path, suffix) -> library -> version, read without loading; ``types``:
    (path, label, policy) -> the types a user would have to accept (None: the format names
    none); ``refusal`` / ``upload_refusal``: what the load job and the upload feedback say
    when the format is refused (``{label}`` / ``{name}``: the user's file name)."""

    name: str
    suffixes: tuple[str, ...]
    trust: str
    load: Loader | None
    checks: tuple[Callable[[object, str], None], ...] = ()
    versions: Callable[[str, str], dict[str, str]] | None = None
    types: Callable[[str, str, Policy], list[str]] | None = None
    refusal: str = ""
    upload_refusal: str = ""

    @property
    def container(self) -> bool:
        """An archive whose inner file is loaded by its own format's row (MLflow)."""
        return self.load is None

    @property
    def lists_types(self) -> bool:
        """The upload feedback lists the types the user would have to accept (skops, and an
        MLflow archive, which may hold a skops file)."""
        return self.types is not None or self.container


def _skops(path: str, label: str, request: Request) -> tuple[object, list[str]]:
    return load_skops(path, label, request.policy, tuple(request.accepted_types))


def _onnx(path: str, label: str, request: Request) -> tuple[object, list[str]]:
    return load_onnx(path, label), []


def _booster(path: str, label: str, request: Request) -> tuple[object, list[str]]:
    return load_booster(path, label, request.suffix, classes=request.classes), []


def _pickle(path: str, label: str, request: Request) -> tuple[object, list[str]]:
    import joblib

    try:
        return joblib.load(path), []
    except Exception as exc:
        raise LoadError(
            f"{label} could not be loaded as a pickle/joblib file ({type(exc).__name__}: {short(exc)}).", field="model"
        ) from exc


def _structure(model: object, label: str) -> None:
    """Tree, boosting, SVM and neighbour structures validated (:func:`dashboard.model_trust.check_model`)."""
    try:
        check_model(model, label)
    except ModelFileError as exc:
        raise LoadError(str(exc), field="model") from exc


def _skops_versions(path: str, suffix: str) -> dict[str, str]:
    return skops_versions(path)


def _onnx_versions(path: str, suffix: str) -> dict[str, str]:
    return onnx_versions(path)


FORMATS: tuple[ModelFormat, ...] = (
    ModelFormat("skops", (".skops",), SAFE, _skops, (_structure,), _skops_versions, untrusted_types),
    ModelFormat("ONNX", (".onnx",), SAFE, _onnx, versions=_onnx_versions),
    ModelFormat("XGBoost / LightGBM / CatBoost", BOOSTER_SUFFIXES, SAFE, _booster, versions=booster_versions),
    ModelFormat(
        "pickle / joblib",
        (".pkl", ".pickle", ".joblib"),  # the only place these suffixes are spelled
        OPT_IN,
        _pickle,
        (_structure,),
        refusal=(
            "{label} is a pickle/joblib file. Loading such a file executes any code it contains, "
            "so this server refuses them. Save the model with skops instead "
            '(import skops.io; skops.io.dump(model, "model.skops")) or convert it to ONNX '
            "(skl2onnx.to_onnx), and upload that file. For trusted users only, the operator can "
            "start the server with --allow-pickle."
        ),
        upload_refusal=(
            "{name}: refused. Pickle and joblib files run code when they are loaded, so this "
            "server does not open them. Save the model with skops.io.dump(model, 'model.skops') "
            "or export it to ONNX."
        ),
    ),
    ModelFormat("MLflow model", (MLFLOW_SUFFIX,), SAFE, None),
)
BY_SUFFIX: dict[str, ModelFormat] = {suffix: fmt for fmt in FORMATS for suffix in fmt.suffixes}
MODEL_SUFFIXES: tuple[str, ...] = tuple(BY_SUFFIX)
PICKLE_SUFFIXES: tuple[str, ...] = tuple(s for s, fmt in BY_SUFFIX.items() if fmt.trust == OPT_IN)
PICKLED_FILE = PICKLE_SUFFIXES[0]  # the suffix a pickled file of an MLflow flavour is read by
#: what the /upload route takes: the table's suffixes, and those read by content (.model / .bst)
ACCEPTED_SUFFIXES: tuple[str, ...] = (*MODEL_SUFFIXES, *AMBIGUOUS_SUFFIXES)
#: what the page says it accepts
FORMATS_TEXT = (
    ".skops, .onnx, XGBoost .json/.ubj, LightGBM .txt, CatBoost .cbm/.json, .model/.bst, an MLflow model .zip"
)


def format_of(suffix: str) -> ModelFormat | None:
    """The row of a suffix (lower case, with its dot); None: no model format (or one read by
    content: :func:`content_suffix` first)."""
    return BY_SUFFIX.get(suffix)


def decision(fmt: ModelFormat, policy: Policy = Policy(), *, own: bool = False) -> str:
    """What a door does with a file of this format: :data:`LOAD`, :data:`REFUSE`, or
    :data:`OWN` (``own``: the file is the operator's, named on the command line: an
    opt-in format loads there, with a warning)."""
    if fmt.trust == SAFE:
        return LOAD
    if own:
        return OWN
    return LOAD if policy.allow_pickle else REFUSE


def refusal(fmt: ModelFormat, label: str) -> LoadError:
    """The load's error for a refused format."""
    return LoadError(fmt.refusal.format(label=label), field="model")


def content_suffix(path: str, name: str | None, label: str) -> str:
    """The suffix that says the file's format: its own (or that of ``name``, the user's file
    name, when the path has none of the table's), or for a ``.model`` / ``.bst`` file
    (LightGBM's and XGBoost's examples use them for several formats) the one its first bytes
    say (raises :class:`LoadError` for content none of those formats has)."""
    suffix = file_suffix(path, name, ACCEPTED_SUFFIXES)
    if suffix not in AMBIGUOUS_SUFFIXES:
        return suffix
    try:
        return suffix_by_content(path, label)
    except OSError as exc:
        raise LoadError(f"{label} could not be read; upload it again.", field="model") from exc
