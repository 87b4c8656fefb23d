"""Reading Dash component trees in tests."""

from __future__ import annotations

import json
import re


def texts(component) -> list[str]:
    """Every string in a Dash component tree."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, (list, tuple)):
        return [t for c in component for t in texts(c)]
    children = getattr(component, "children", None)
    return [] if children is None else texts(children)


def report_figures(html: str) -> list[tuple[list, dict]]:
    """The (data, layout) of every figure in a report, parsed from its scripts as the browser
    reads them: what a reader sees, whichever way the JSON spells a character."""
    decoder, found = json.JSONDecoder(), []
    for start in (m.end() for m in re.finditer(r"Plotly\.newPlot\(", html)):
        _, end = decoder.raw_decode(html, start)  # the div id
        data, end = decoder.raw_decode(html, end + 2)  # after ", "
        layout, _ = decoder.raw_decode(html, end + 2)
        found.append((data, layout))
    return found


def figure_title(layout: dict) -> str:
    title = layout.get("title") or {}
    return title.get("text", "") if isinstance(title, dict) else str(title)


def plotly_array(values) -> list | None:
    """A figure's array as numbers, however it was written: a list, a numpy array, or the
    typed array Plotly's JSON encoder writes (``{"dtype": "f8", "bdata": base64}``)."""
    import base64

    import numpy as np

    if values is None:
        return None
    if isinstance(values, dict) and "bdata" in values:
        flat = np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"]))
        shape = values.get("shape")
        if isinstance(shape, str):
            shape = [int(s) for s in shape.split(",")]
        return (flat.reshape(shape) if shape else flat).tolist()
    return np.asarray(values).tolist()
