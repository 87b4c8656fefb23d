"""ICE curves and PD of the feature (Goldstein et al.; SIPA, seed 002), optionally centred."""

from __future__ import annotations

from dash import dcc

from .. import components, figures, ids
from ..state import bool_field
from .base import PROFILES, View, empty
from .engine_note import engine_note
from .selection import eligible_mask, selected_label


def checked(value) -> bool:
    """The "centred ICE" checklist's value (a list of the ticked options) as the field's."""
    if value is not None and not isinstance(value, list):
        raise TypeError("not a checklist's value")
    return "c" in (value or [])


# ``centered=1`` in the URL; the checklist shows it
CENTERED = bool_field("centered", control=(ids.CENTERED, "value"), read=checked, show=lambda on: ["c"] if on else [])


def render(ctx, inp) -> dict:
    prof = inp.profile
    if prof is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    fig = figures.ice_figure(
        prof,
        selected=selected_label(inp, prof.rows),
        mask=eligible_mask(inp),
        centered=bool(inp.state.get("centered")),
        label=inp.label(prof.feature),
        output_label=None if prof.output is None else inp.class_label(prof.output),
    )
    return {"figure": figures.add_subtitle(fig, engine_note(prof, short=True))}


def library(inp) -> dict:
    """The PD line (of the subgroup's rows on a subgroup; centred when asked) and the
    selected row's curve (``FeatureProfile.mean_curve`` and ``curves``)."""
    prof = inp.profile
    if prof is None:
        return {}
    centered = bool(inp.state.get("centered"))
    found = {"PD": prof.mean_curve("ICE", mask=eligible_mask(inp), centered=centered)}
    row = selected_label(inp, prof.rows)
    if row is not None:
        found["selected row"] = prof.curves("ICE", centered=centered)[prof.rows.get_loc(row)]
    return found


VIEW = View(
    name="ice",
    section="feature",
    order=60,
    title="ICE curves and PD",
    question="How do the predictions move with the feature, row by row?",
    method=(
        "Individual conditional expectation (ICE) curves and their mean, the partial dependence (PD); the "
        "same rows and highlights as the ICI curves."
    ),
    outputs={"figure": (ids.ICE_GRAPH, "figure")},
    render=render,
    body=lambda: [components.graph(ids.ICE_GRAPH, filename="ice")],
    extra=lambda: dcc.Checklist(id=ids.CENTERED, options=[{"label": " centred ICE", "value": "c"}], value=[]),
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "obs"}),
    state=(CENTERED,),
    library=library,
)
