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
