"""What we found: the Overview (and the report) open with 3-7 plain sentences made from the
computed results (``compute.findings``), each with its number and uncertainty and a link to
the view that shows it. A sentence only appears when its results say something."""

from __future__ import annotations

import html as html_lib

from dash import html

import compute
from compute import findings
from compute.losses import LOSS_LABELS

from .. import ids
from . import caveats, interactions, performance, subgroup_finder
from .base import PFI, PROFILES, View

LIST = "findings-list"
INFO = "findings-info"
# the view that shows each finding's results: (view name, section, link text)
SHOWN_IN = {
    "importance": ("pfi", "overview", "see the importance bars"),
    "subgroups": ("subgroup_finder", "subgroups", "see the subgroups found"),
    "interactions": ("interactions", "overview", "see which features act together"),
    "dependence": ("pfi_caveats", "overview", "see the conditional importance"),
    "leak": ("pfi_caveats", "overview", "see the leak check"),
    "performance": ("performance", "overview", "see the model's error by rows"),
}


def found(inp) -> list[compute.findings.Finding]:
    """The findings of the state's focus model, in reading order."""
    model = inp.state["model"]
    pfi = inp.pfi.get(model)
    if pfi is None:
        return []
    loss = LOSS_LABELS.get(pfi.loss, pfi.loss)
    out = [findings.reliance(pfi, model=str(model), loss=loss)]
    top = pfi.importance.idxmax()
    profile = inp.profile_of(top)
    if profile is not None and profile.has_target:
        suggestions = subgroup_finder.suggestions(inp, profile)  # the splits that view lists, for the top feature
        if suggestions is not None:
            out.append(findings.where_importance_comes_from(suggestions))
    together = inp.results(interactions.KIND).get(model)
    if together is not None:
        out.append(findings.acting_together(together))
    cs = inp.results(caveats.CS_KIND).get(model)
    if cs is not None:
        out.append(findings.inflated_by_dependence(cs, pfi))
    predictions = inp.results(performance.KIND).get(model)
    if predictions is not None and inp.mask is not None:
        inside = inp.mask.reindex(predictions.rows).fillna(False).to_numpy(bool)
        if 2 <= inside.sum() <= inside.size - 2:
            gap = compute.performance_gap(predictions, inp.data[inp.ws.target], inside, loss=pfi.loss)
            out.append(findings.worse_where(gap, subgroup=inp.state["subgroup"], loss=loss))
    check = caveats.leak_check(inp, pfi)
    if check is not None:
        out.append(findings.leak_warning(check))
    return [f for f in out if f is not None]


def render(ctx, inp) -> dict:
    items = found(inp)
    if not items:
        return {"list": [], "info": "Nothing stands out yet: no feature's shuffle raises the error."}
    entries = []
    for item in items:
        view, section, words = SHOWN_IN[item.topic]
        link = html.A(
            words,
            href=f"#view-{view}",
            id={"type": ids.VIEW_LINK, "view": view, "section": section},
            className="finding-link",
        )
        entries.append(html.Li([html.Span(item.text), " ", link], className=f"finding finding-{item.topic}"))
    return {"list": [html.Ol(entries, className="findings")], "info": ""}


def report(out: dict) -> list[str]:
    """The findings as a numbered list in the HTML report (links become plain text)."""
    items = []
    for block in out.get("list") or []:
        for entry in block.children:
            items.append(f"<li>{html_lib.escape(entry.children[0].children)}</li>")
    return [f"<ol class='findings'>{''.join(items)}</ol>"] if items else []


def library(inp) -> dict:
    """The numbers the sentences state: each feature named as relied on, with its PFI."""
    items = found(inp)
    shown: dict = {}
    for item in items:
        if item.topic == "importance":
            for feature, value in item.numbers["importance"].items():
                shown[f"PFI of {feature}"] = float(value)
    return shown


VIEW = View(
    name="findings",
    section="overview",
    order=1,
    title="What we found",
    question="What do the results say, in a few sentences?",
    method=(
        "Each sentence is a function of computed results (compute.findings): the PFI bars (Casalicchio et al. "
        "2018, Eq. 8) and their standard errors (features within two standard errors of the first are named "
        "together), the strongest split of the top feature's ICI curves (Eq. 9; subgroups found), Friedman's H² "
        "of the strongest pair (Friedman & Popescu 2008, Eq. 44), conditional against marginal PFI (Molnar et al. "
        "2023), the model's error on the subgroup against the rest (a Welch interval) and seed 001's leak check. "
        "A sentence appears only when its numbers say something."
    ),
    outputs={"list": (LIST, "children"), "info": (INFO, "children")},
    render=render,
    report=report,
    body=lambda: [html.Div(id=LIST), html.Div(id=INFO, className="help")],
    needs=frozenset({PFI, PROFILES}),
    reads=frozenset({"ws", "model", "subgroup", "exclude", "repeats", "pfi_all"}),
    placeholder=lambda message: {"list": [], "info": message},
    library=library,
    wide=True,
)
