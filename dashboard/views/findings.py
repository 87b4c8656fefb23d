"""What we found: the Overview (and the report) open with 3-7 plain sentences made from the
computed results (``compute.findings``), each with its number and uncertainty and a link to
the view that shows it. A sentence only appears when its results say something."""

from __future__ import annotations

import html as html_lib
import json

from dash import html

import compute
from compute import findings
from compute.losses import LOSS_LABELS

from .. import ids, labels
from . import caveats, interactions, performance, subgroup_finder
from . import pfi as pfi_view
from .base import PFI, PROFILES, Lru, View

LIST = "findings-list"
INFO = "findings-info"
# the view that shows each finding's results: (view name, section, link text)
SHOWN_IN = {
    "importance": ("pfi", "overview", "see the importance bars"),
    "subgroups": ("subgroup_finder", "subgroups", "see the subgroups found"),
    "interactions": ("interactions", "overview", "see which features act together"),
    "dependence": ("pfi_caveats", "overview", "see the importance once the others are known"),
    "leak": ("pfi_caveats", "overview", "see the leak check"),
    "performance": ("performance", "overview", "see each model's error"),
}


# each sentence's numbers, per process: read off results that never change under their cache keys
# (content hashes), on rows named by the data's checksum, the subgroup and the exclusions (the
# sentences do not depend on the chosen feature: a feature switch finds them all here)
_DERIVED = Lru(64)

ROWS_NOTE = {  # what the rows are, as a clause after the verdict (nothing for held-out rows)
    "training": "; these are the rows it trained on, which flatters it",
    "unknown": "; it may have trained on these rows (not said at Load), which would flatter it",
}


def found(inp) -> list[compute.findings.Finding]:
    """The findings in reading order: the verdict on the models first, then what the best
    model's performance relies on (its PFI), then what the curves, pairs and subgroups of
    the model chosen for them say (named when it is not the best). A result that could not
    be computed for these rows leaves out only the sentence that reads it."""
    focus = inp.state["model"]
    every = _quiet(lambda: inp.pfi, {})
    loss_name = next((p.loss for p in every.values()), inp.ws.loss)
    loss = LOSS_LABELS.get(loss_name, loss_name)
    skills, comparison = _quiet(lambda: _verdicts(inp), ({}, None))
    note = ROWS_NOTE.get(getattr(inp.ws, "data_role", "unknown"), "")
    if inp.mask is not None and skills:
        rows = next(iter(skills.values())).n_rows
        note = f"; on the {rows:,} rows where {inp.state['subgroup']}{note}"
    out: list = list(findings.verdict(skills, comparison, loss=loss, rows_note=note))
    best = comparison.best if comparison is not None else focus
    pfi_keys = inp.keys.get("pfi", {})
    chosen = best if best in every else focus
    pfi = every.get(chosen)
    if pfi is not None:
        model = str(best if best in every else focus)
        out.append(
            _derived(
                ("reliance", pfi_keys.get(chosen), model, loss), lambda: findings.reliance(pfi, model=model, loss=loss)
            )
        )
    focus_pfi = every.get(focus)
    focus_key = pfi_keys.get(focus)
    about = [] if focus_pfi is None else [_quiet(lambda: _where(inp, focus_pfi, focus_key), None)]
    together = _quiet(lambda: inp.results(interactions.KIND).get(focus), None)
    if together is not None:
        key = inp.keys.get(interactions.KIND, {}).get(focus)
        about.append(_derived(("together", key), lambda: findings.acting_together(together)))
    cs = _quiet(lambda: inp.results(caveats.CS_KIND).get(focus), None)
    if cs is not None and focus_pfi is not None:
        key = inp.keys.get(caveats.CS_KIND, {}).get(focus)
        about.append(_derived(("inflated", key, focus_key), lambda: findings.inflated_by_dependence(cs, focus_pfi)))
    about.append(_quiet(lambda: _gap(inp, focus, loss, loss_name), None))
    if focus_pfi is not None:
        check = _quiet(lambda: caveats.leak_check(inp, focus_pfi, focus_key), None)
        if check is not None:
            about.append(findings.leak_warning(check))
    about = [f for f in about if f is not None]
    if focus != best:  # say whose results these are
        about = [_for_model(focus, f) for f in about]
    return [f for f in out + about if f is not None]


def _derived(tag: tuple, compute):
    """``compute()``, kept under ``tag`` when it names every input (no part of it None); a
    None result is kept too."""
    if any(part is None for part in tag):
        return compute()
    return _DERIVED.get(tag, lambda: (compute(),))[0]


def _rows_tag(inp) -> str:
    """The rows looked at, by name: the data set, the subgroup and the exclusions."""
    return json.dumps(
        [inp.ws.id, inp.ws.data_sha, inp.state["subgroup"], list(map(str, inp.state.get("exclude") or ()))]
    )


def _verdicts(inp):
    """:func:`performance.verdicts`, kept under the cached predictions' keys and the rows."""
    preds = inp.results(performance.KIND)  # the models whose predictions are cached
    keys = inp.keys.get(performance.KIND, {})
    tag = tuple(sorted((str(m), keys.get(m)) for m in preds))
    ws = inp.ws
    return _derived(("verdicts", tag, ws.target, ws.loss, _rows_tag(inp)), lambda: performance.verdicts(inp))


def _quiet(read, default):
    """``read()``, or ``default`` when its results could not be computed for these rows."""
    try:
        return read()
    except compute.ExplainError:
        return default


def _where(inp, pfi, key: str | None = None) -> compute.findings.Finding | None:
    """Where the top feature's importance comes from (the splits the subgroups view lists).
    ``key``: the PFI result's cache key."""
    top = _derived(("top", key), lambda: pfi.importance.idxmax())
    profile = inp.profile_of(top)
    if profile is None or not profile.has_target:
        return None
    suggestions = subgroup_finder.suggestions(inp, profile)
    return None if suggestions is None else findings.where_importance_comes_from(suggestions)


def _gap(inp, model, loss: str, loss_name: str) -> compute.findings.Finding | None:
    """The model's error on the subgroup against the other rows."""
    predictions = inp.results(performance.KIND).get(model)
    if predictions is None or inp.mask is None:
        return None
    key = inp.keys.get(performance.KIND, {}).get(model)
    return _derived(("gap", key, loss, loss_name, _rows_tag(inp)), lambda: _worse(inp, predictions, loss, loss_name))


def _worse(inp, predictions, loss: str, loss_name: str) -> compute.findings.Finding | None:
    inside = inp.mask.reindex(predictions.rows).fillna(False).to_numpy(bool)
    if not 2 <= inside.sum() <= inside.size - 2:
        return None
    gap = compute.performance_gap(predictions, inp.data[inp.ws.target], inside, loss=loss_name)
    return findings.worse_where(gap, subgroup=inp.state["subgroup"], loss=loss)


def _for_model(model, item: compute.findings.Finding) -> compute.findings.Finding:
    """A finding about the model chosen for the curves, when another model is the best."""
    text = item.text[0].lower() + item.text[1:] if item.text.startswith("The ") else item.text
    return compute.findings.Finding(item.topic, f"For {model} (the model chosen for the curves), {text}", item.numbers)


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
        text = labels.relabel_text(inp.ws, item.text)  # the features and classes as people read them
        entries.append(html.Li([html.Span(text), " ", link], className=f"finding finding-{item.topic}"))
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
        "Each sentence is written from the computed results shown in the panels it links to. First the "
        "verdict: each model's skill against the best constant prediction under PFI's loss (1 - loss / the "
        "constant's loss: R² for squared error, McFadden's pseudo-R² for log loss) with a 95 % delta-method "
        "interval, and with several models the best one and whether its lead is beyond its uncertainty "
        "(paired on the same rows). Then the best model's PFI bars (Casalicchio et al. 2018, Eq. 8) and their "
        "standard errors (features within two standard errors of the first are named together), the strongest "
        "split of the top feature's ICI curves (Eq. 9; subgroups found), Friedman's H² of the strongest pair "
        "(Friedman & Popescu 2008, Eq. 44), importance once the other features are known against the bars "
        "(Molnar et al. 2023), the model's error on the subgroup against the rest (a Welch interval) and the "
        "leak check (a near-perfect model whose importance sits on one or two features). A sentence appears "
        "only when its numbers say something."
    ),
    outputs={"list": (LIST, "children"), "info": (INFO, "children")},
    render=render,
    report=report,
    body=lambda: [html.Div(id=LIST), html.Div(id=INFO, className="help")],
    needs=frozenset({PFI, PROFILES}),
    reads=frozenset({"ws", "model", "subgroup", "exclude", pfi_view.REPEATS, pfi_view.PFI_ALL}),
    placeholder=lambda message: {"list": [], "info": message},
    library=library,
    wide=True,
)
