"""Has the PFI ranking settled? PFI after 1..R permutations with its band (seed 001, caveat 2)."""

from __future__ import annotations

from dash import html

import compute
from compute.losses import LOSS_LABELS

from .. import components, figures
from . import pfi as pfi_view
from .base import PFI, View, empty

GRAPH = "convergence-graph"
INFO = "convergence-info"
TOP = 5  # the ranking whose stability is reported: the top TOP features


def render(ctx, inp) -> dict:
    model = inp.state["model"]
    pfi = inp.pfi.get(model)
    if pfi is None:
        return {"figure": empty("Waiting for the permutations…"), "info": ""}
    if pfi.n_repeats < 2:
        return {"figure": empty("One permutation: nothing to converge yet."), "info": ""}
    conv = compute.pfi_convergence(pfi, top=TOP)
    n, k = conv.n_repeats, min(TOP, len(pfi.features))
    top = f"the top {k}" if k > 1 else "the top feature"
    if conv.stable_from == 1:
        headline = f"The order of {top} has not changed since the first permutation"
    elif conv.settled:
        headline = f"The order of {top} has held since permutation {conv.stable_from} of {n}"
    else:
        headline = f"The order of {top} still changed at permutation {conv.stable_from - 1} of {n}"
    title = headline
    ties = compute.ranking_ties(pfi, TOP)  # the rule the findings use to say "cannot tell apart"
    if ties:
        pairs = [f"{inp.label(a)} from {inp.label(b)}" for a, b in ties]  # neighbours in the ranking
        verdict = (
            f"Not settled: these permutations cannot tell {', nor '.join(pairs)} (each difference is within 1.96 "
            "standard errors of 0), so their order may change; ask for more repetitions (PFI panel), or read them "
            "as equally important."
        )
        # the chart's headline says the verdict: an order that has not changed is not yet a settled one
        title = "Not settled yet: the bands of the top features overlap"
    elif conv.settled:
        verdict = "The ranking has settled: each of the top features is told apart from the next."
    else:
        verdict = "Ask for more repetitions (PFI panel) before reading the ranking; the bands show where it may go."
    info = (
        f"{headline}; the most important feature ({inp.label(conv.top[0])}) has led since permutation "
        f"{conv.top_stable_from}. " + verdict
    )
    loss = LOSS_LABELS.get(pfi.loss, pfi.loss)
    fig = figures.convergence_figure(
        conv,
        loss=loss,
        selected=inp.feature,
        title=title,
        names=inp.names,
        subtitle=f"{model}; running mean with its {conv.level:.0%} band; {inp.selection}",
    )
    return {"figure": fig, "info": info}


def _names(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def library(inp) -> dict:
    """The running mean of the final top features (``compute.pfi_convergence``)."""
    pfi = inp.pfi.get(inp.state["model"])
    if pfi is None or pfi.n_repeats < 2:
        return {}
    conv = compute.pfi_convergence(pfi, top=TOP)
    final = conv.importance.iloc[:, -1].sort_values(ascending=False, kind="stable")
    return {f"{f}: running mean": conv.importance.loc[f].to_numpy(float) for f in final.index[:TOP]}


VIEW = View(
    name="pfi_convergence",
    section="overview",
    order=12,
    title="Has the ranking settled?",
    question="Would more permutations change which features look most important?",
    method=(
        "Turp, Permutation Feature Importance: Deep Dive (Modulos blog), caveat 2: too few permutations give an "
        "unstable "
        "ranking. The PFI of Casalicchio et al. (2018), Eq. 8, after the first r of its R permutations (the "
        "running mean) with a normal-theory band of ±1.96 standard errors (ddof=1); no new model calls."
    ),
    outputs={"figure": (GRAPH, "figure"), "info": (INFO, "children")},
    render=render,
    body=lambda: [
        components.graph(GRAPH, height=None, filename="pfi-convergence"),
        html.Div(id=INFO, className="help"),
    ],
    needs=frozenset({PFI}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", pfi_view.REPEATS, pfi_view.PFI_ALL}),
    library=library,
)
