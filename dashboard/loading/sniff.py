"""Model files whose suffix does not say their format: read by their first bytes."""

from __future__ import annotations

from .errors import LoadError

#: suffixes the libraries' own examples use for files of more than one format (LightGBM's
#: examples save ``model.model``; XGBoost's older ones ``0001.model`` / ``.bst``): read by content
AMBIGUOUS_SUFFIXES = (".model", ".bst")
_UBJSON_KEY_MARKERS = b"iUIlL$#"  # what follows UBJSON's "{": a key length's type, or a count


def suffix_by_content(path, label: str) -> str:
    """The format of a model file whose suffix does not say it (:data:`AMBIGUOUS_SUFFIXES`),
    from its first bytes: LightGBM text ("tree"), CatBoost's binary ("CBM1"), XGBoost's
    JSON or UBJSON ("{", then text or a UBJSON length marker). XGBoost's binary format from
    before 1.0 and anything else are refused, naming what to do."""
    with open(path, "rb") as handle:
        head = handle.read(64)
    stripped = head.lstrip()
    if head.startswith(b"tree\n") or head.startswith(b"tree\r\n"):
        return ".txt"
    if head.startswith(b"CBM1"):
        return ".cbm"
    if head.startswith(b"{") and len(head) > 1 and head[1] in _UBJSON_KEY_MARKERS:
        return ".ubj"
    if stripped.startswith(b"{"):
        return ".json"
    if head.startswith(b"binf") or head[:4] == b"\x00\x00\x00\x3f":
        raise LoadError(
            f"{label} is an XGBoost model in the binary format of XGBoost before 1.0, which XGBoost 3 no longer "
            "reads: load it with the XGBoost that wrote it and save it again with save_model('model.json').",
            field="model",
        )
    raise LoadError(
        f"{label}: its content is none of the model formats a {' or '.join(AMBIGUOUS_SUFFIXES)} file can hold "
        "(LightGBM text, XGBoost JSON or UBJSON, CatBoost .cbm).",
        field="model",
    )
