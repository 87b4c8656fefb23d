"""Reading Dash component trees in tests."""

from __future__ import annotations


def texts(component) -> list[str]:
    """Every string in a Dash component tree."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, (list, tuple)):
        return [t for c in component for t in texts(c)]
    children = getattr(component, "children", None)
    return [] if children is None else texts(children)
