"""Human labels for features and classes: ``{"features": {"income_k": "Yearly income (k$)"},
"classes": {"1": "churned"}}``, given as ``labels=`` to ``dashboard.show``/``report``, as
``--labels FILE`` on the command line or as a labels file at upload.

Labels are presentation only: they are kept on the :class:`~dashboard.store.Workspace`
and shown on axes, in tables, in the findings and in the report, while the column name
stays the key of everything else (the state and its URL, the cache keys of computations,
``numbers.json``). A labels file is a visitor's file like any upload: its size is limited,
it is parsed with a depth and size bounded reader, and it may hold only the two keys, each
a map of text to text, every label short and on one line. A feature or class the data set
does not have is refused, naming it. Labels are shown as text, never as markup (the pages
and figures escape them as they escape column names).

One place maps a name to its label: :func:`feature_label` / :func:`class_label` (and
:func:`feature_names`, the map a figure builder takes)."""

from __future__ import annotations

import json
import numbers
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import compute

MAX_BYTES = 64 * 1024  # a labels file (upload, --labels, labels= given as a path)
MAX_LABEL = 80  # characters of one label
MAX_ENTRIES = 5000  # labels in one file (features and classes together)
MAX_DEPTH = 2  # {"features": {name: label}}: nothing deeper
KEYS = ("features", "classes")
SUFFIXES = (".json",)


class LabelsError(compute.InputError):
    """A labels file or ``labels=`` that cannot be used; the message names the key or field.
    ``field`` is the page input the message belongs next to (as ``LoadError.field``)."""

    field = "labels"


def read_labels(path, *, name: str | None = None) -> dict:
    """The labels of a file (a ``.json`` of at most :data:`MAX_BYTES`), checked for their
    shape (:func:`check_shape`), not yet against a data set."""
    path = Path(path)
    shown = name or path.name
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise LabelsError(f"{shown}: the labels file cannot be read ({exc.strerror or type(exc).__name__}).") from exc
    if size > MAX_BYTES:
        raise LabelsError(f"{shown}: a labels file is at most {MAX_BYTES // 1024} KiB (this one is {size:,} bytes).")
    with open(path, "rb") as handle:
        raw = handle.read(MAX_BYTES + 1)
    return parse_labels(raw, name=shown)


def parse_labels(raw: bytes | str, *, name: str = "labels") -> dict:
    """Labels from the text of a labels file: bounded in size and nesting before the JSON
    parser sees it, then checked for their shape (:func:`check_shape`)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if len(raw) > MAX_BYTES:
        raise LabelsError(f"{name}: a labels file is at most {MAX_BYTES // 1024} KiB.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelsError(f"{name}: not UTF-8 text (byte {exc.start}).") from exc
    _check_nesting(text, name)
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise LabelsError(f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).") from exc
    except ValueError as exc:  # a duplicate key, NaN or Infinity
        raise LabelsError(f"{name}: {exc}") from exc
    return check_shape(doc, name=name)


def _check_nesting(text: str, name: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` before parsing it (a file of many
    brackets would otherwise reach the parser's recursion)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise LabelsError(
                    f'{name}: nested too deep: a labels file is {{"features": {{...}}, "classes": {{...}}}}, '
                    "each a map of names to labels."
                )
        elif char in "]}":
            depth -= 1


def _no_duplicates(pairs):
    counts = Counter(k for k, _ in pairs)  # linear: a 64 KiB file holds thousands of keys
    twice = sorted(k for k, n in counts.items() if n > 1)
    if twice:
        raise ValueError(f"the key {twice[0]!r} is given twice.")
    return dict(pairs)


def _no_constant(word):
    raise ValueError(f"{word} is not a label.")


def check_shape(doc: Any, *, name: str = "labels") -> dict:
    """``doc`` as ``{"features": {str: str}, "classes": {str: str}}`` (either key may be
    left out), every label trimmed, on one line and at most :data:`MAX_LABEL` characters;
    raises :class:`LabelsError` naming the key or field at fault."""
    if not isinstance(doc, Mapping):
        raise LabelsError(
            f'{name}: labels are a JSON object {{"features": {{...}}, "classes": {{...}}}} (got {_kind(doc)}).'
        )
    unknown = [str(k) for k in doc if k not in KEYS]
    if unknown:
        raise LabelsError(
            f"{name}: unknown key {unknown[0][:40]!r}: a labels file has only the keys 'features' and 'classes'."
        )
    out: dict = {}
    count = 0
    for key in KEYS:
        part = doc.get(key, {})
        if part is None:
            part = {}
        if not isinstance(part, Mapping):
            raise LabelsError(f"{name}: '{key}' must map names to labels (got {_kind(part)}).")
        shown: dict[str, str] = {}
        for item, label in part.items():
            if isinstance(item, numbers.Integral) and not isinstance(item, bool):
                item = str(item)  # a class given from Python as 1: the JSON file's "1"
            if not isinstance(item, str):
                raise LabelsError(f"{name}: '{key}' has a name that is not text ({_kind(item)}).")
            where = f"{key}.{item[:40]}"
            if not isinstance(label, str):
                raise LabelsError(f"{name}: the label of '{where}' must be text (got {_kind(label)}).")
            text = label.strip()
            if not text:
                raise LabelsError(f"{name}: the label of '{where}' is empty.")
            if len(text) > MAX_LABEL:
                raise LabelsError(
                    f"{name}: the label of '{where}' is {len(text)} characters; a label is at most {MAX_LABEL}."
                )
            if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
                raise LabelsError(f"{name}: the label of '{where}' holds a line break or control character.")
            shown[item] = text
        count += len(shown)
        if count > MAX_ENTRIES:
            raise LabelsError(f"{name}: at most {MAX_ENTRIES:,} labels.")
        if shown:
            out[key] = shown
    return out


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def given_labels(labels, *, name: str = "labels") -> dict:
    """``labels=`` of ``show``/``report`` or ``--labels``: a dict of the labels file's shape,
    or the path of such a file (None: no labels)."""
    if labels is None:
        return {}
    if isinstance(labels, (str, os.PathLike)):
        return read_labels(labels)
    if isinstance(labels, Mapping):
        return check_shape(labels, name=name)
    raise LabelsError(f"{name}: give a dict {{'features': ..., 'classes': ...}} or the path of a labels file.")


def source_name(labels) -> str:
    """What a message calls ``labels=``: the file's name, or "labels" for a dict."""
    return Path(labels).name if isinstance(labels, (str, os.PathLike)) else "labels"


def check_known(labels: Mapping, *, features: Iterable, classes: Iterable | None, name: str = "labels") -> dict:
    """``labels`` (shaped by :func:`check_shape`) when every feature is one of ``features``
    and every class one of ``classes`` (their text; None: the models are regressors, which
    have no classes); raises :class:`LabelsError` naming the first unknown one."""
    known = [str(f) for f in features]
    for feature in (labels.get("features") or {}).keys():
        if feature not in known:
            listed = ", ".join(known[:12]) + (", …" if len(known) > 12 else "")
            raise LabelsError(
                f"{name}: features.{feature[:40]!r} is not a feature of the models (their features: {listed})."
            )
    given = labels.get("classes") or {}
    if given and classes is None:
        first = next(iter(given))
        raise LabelsError(f"{name}: classes.{first[:40]!r}: the models are regressors, which have no classes.")
    values = [str(c) for c in classes or ()]
    for value in given:
        if value not in values:
            listed = ", ".join(values[:12]) + (", …" if len(values) > 12 else "")
            raise LabelsError(f"{name}: classes.{value[:40]!r} is not a class of the target (its classes: {listed}).")
    return {key: dict(part) for key, part in labels.items() if part}


def target_classes(task: str, target_values, *more) -> list[str] | None:
    """The classes a label may name: the target's values and the models' own class labels
    (as text), or None for regressors."""
    if task != "classification":
        return None
    found = [str(v) for v in target_values if v is not None and v == v]
    for values in more:
        found.extend(str(v) for v in values or () if v is not None)
    return list(dict.fromkeys(found))


# --- showing them ---------------------------------------------------------------------------
def _part(ws, key: str) -> Mapping:
    labels = getattr(ws, "labels", None) or {}
    part = labels.get(key) if isinstance(labels, Mapping) else None
    return part if isinstance(part, Mapping) else {}


def feature_names(ws) -> dict[str, str]:
    """Column name -> label of the workspace's labelled features (what figure builders take)."""
    return dict(_part(ws, "features"))


def class_names(ws) -> dict[str, str]:
    """Class value (as text) -> label of the workspace's labelled classes."""
    return dict(_part(ws, "classes"))


def feature_label(ws, name) -> str:
    """A feature as people read it: its label, or its column name."""
    return _part(ws, "features").get(str(name), str(name))


def class_label(ws, value) -> str:
    """A class as people read it: its label, or the class value as text."""
    return _part(ws, "classes").get(str(value), str(value))


def labelled(names: Mapping[str, str] | None, name) -> str:
    """``name``'s label in a feature map (a figure builder's ``names``), or ``name`` as text."""
    return (names or {}).get(str(name), str(name))


def option_label(ws, name) -> str:
    """A feature in a dropdown: "Yearly income (k$) (income_k)" when labelled (the option's
    value stays the column name), else the column name."""
    label = _part(ws, "features").get(str(name))
    return f"{label} ({name})" if label and label != str(name) else str(name)


def relabel_text(ws, text: str) -> str:
    """A sentence written with column names (``compute.findings``) with each labelled
    feature's name, as a whole word, and each labelled class quoted ('1'), written as its
    label. Only labelled names are touched, the longest first, in one pass."""
    features, classes = _part(ws, "features"), _part(ws, "classes")
    if not (features or classes) or not isinstance(text, str):
        return text
    words = {k: v for k, v in features.items() if k}
    quoted = {f"'{k}'": f"'{v}'" for k, v in classes.items()}
    table = {**words, **quoted}
    pattern = "|".join(
        (re.escape(k) if k in quoted else rf"(?<![\w.]){re.escape(k)}(?![\w])")
        for k in sorted(table, key=len, reverse=True)
    )
    return re.sub(pattern, lambda m: table.get(m.group(0), m.group(0)), text)


__all__ = [
    "LabelsError",
    "MAX_BYTES",
    "MAX_LABEL",
    "check_known",
    "check_shape",
    "class_label",
    "class_names",
    "feature_label",
    "feature_names",
    "given_labels",
    "labelled",
    "option_label",
    "parse_labels",
    "read_labels",
    "relabel_text",
    "source_name",
    "target_classes",
]
