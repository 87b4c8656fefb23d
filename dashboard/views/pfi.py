"""Permutation feature importance (Casalicchio et al. 2018, Eq. 8) of every model."""

from __future__ import annotations

from dash import html

from .. import figures, ids, layout
from ..state import DEFAULT_REPEATS
from .base import PFI, View, data_role_note, empty
from .caveats import partners_line


def render(ctx, inp) -> dict:
    pfi = inp.pfi
    reset = {} if inp.state.get("repeats") != DEFAULT_REPEATS else {"display": "none"}
    if not pfi:
        return {"figure": empty("Waiting for the permutations…"), "info": "", "reset_style": reset}
    first = next(iter(pfi.values()))
    title = f"How much the error ({first.loss}) grows when a feature is shuffled"
    names = ", ".join(str(m) for m in pfi)
    subtitle = f"{names}; PFI ({first.kind}), mean ± std over {first.n_repeats} permutations; {inp.selection}"
    rel = max(res.relative_error() for res in pfi.values())
    info = (
        f"{first.n_rows:,} rows. The features that matter are known to ±{rel:.0%} (standard error of the mean "
        f"over {first.n_repeats} permutations)" + (": ask for more repetitions to settle them." if rel > 0.1 else ".")
    )
    note = data_role_note(inp.ws, "pfi")
    info = f"{info} {note}" if note else info
    if inp.mask is not None:
        info += (
            " On a subgroup each feature is shuffled among the subgroup's rows only: a feature constant there "
            "(like one that defines the subgroup) gets 0, while the conditional PFI (Subgroups) gives it its "
            "values from all rows."
        )
    dependent = partners_line(inp)
    info = f"{info} {dependent}" if dependent else info
    return {
        "figure": figures.pfi_figure(pfi, selected=inp.feature, title=title, subtitle=subtitle),
        "info": info,
        "reset_style": reset,
    }


VIEW = View(
    name="pfi",
    section="overview",
    order=10,
    title="Permutation feature importance",
    question="Which features does each model's accuracy depend on? Click a bar to pick a feature.",
    method=(
        "Permutation feature importance, Casalicchio, Molnar & Bischl (2018), Eq. 8: the increase in error "
        "when a feature's values are shuffled among the selected rows, mean and spread over repetitions."
    ),
    outputs={
        "figure": (ids.PFI_GRAPH, "figure"),
        "info": (ids.PFI_INFO, "children"),
        "reset_style": (ids.REPEATS_RESET, "style"),
    },
    placeholder=lambda message: {"figure": empty(message), "info": "", "reset_style": {"display": "none"}},
    render=render,
    body=lambda: [
        layout.graph(ids.PFI_GRAPH, height=None, filename="pfi"),
        html.Div(id=ids.PFI_INFO, className="help"),
    ],
    extra=lambda: [
        html.Button(
            f"Back to {DEFAULT_REPEATS}", id=ids.REPEATS_RESET, className="button small", style={"display": "none"}
        ),
        html.Button("More repetitions", id=ids.REPEATS_MORE, className="button small"),
    ],
    needs=frozenset({PFI}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "repeats"}),
)
