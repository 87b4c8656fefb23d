"""Permutation feature importance (Casalicchio et al. 2018, Eq. 8) of every model."""

from __future__ import annotations

from dash import html

from compute.losses import LOSS_LABELS

from .. import components, figures, ids, planning
from ..state import Event, bool_field, int_field
from . import sfimp
from .base import PFI, Select, View, data_role_note, empty
from .caveats import partners_line
from .engine_note import engine_note, joined

PFI_GRAPH = "pfi-graph"  # clicking it selects the feature
DEFAULT_REPEATS = planning.DEFAULT_PFI_REPEATS  # the repetitions PFI's row budget is sized for
MAX_REPEATS = 200


def more_repeats(value: int) -> int:
    """ "More repetitions": twice as many, up to MAX_REPEATS."""
    return min(int(value or DEFAULT_REPEATS) * 2, MAX_REPEATS)


def reset_repeats(value: int) -> int:
    return DEFAULT_REPEATS


def toggle_pfi_all(value: bool) -> bool:
    """PFI on every selected row, or back to a seeded sample within the budget."""
    return not value


# the view's state fields (in the URL as ``repeats`` and ``pfi_all``)
REPEATS = int_field(
    "repeats",
    DEFAULT_REPEATS,
    low=2,
    high=MAX_REPEATS,
    events=(Event(ids.REPEATS_MORE, more_repeats), Event(ids.REPEATS_RESET, reset_repeats)),
)
PFI_ALL = bool_field("pfi_all", events=(Event(ids.PFI_ALL, toggle_pfi_all),))  # every row, not a sample


def render(ctx, inp) -> dict:
    pfi = inp.pfi
    reset = {} if inp.state.get("repeats") != DEFAULT_REPEATS else {"display": "none"}
    hidden = {"display": "none"}
    if not pfi:
        return {
            "figure": empty("Waiting for the permutations…"),
            "info": "",
            "reset_style": reset,
            "all_label": "Use all rows",
            "all_style": hidden,
        }
    first = next(iter(pfi.values()))
    title = f"How much the error ({LOSS_LABELS.get(first.loss, first.loss)}) grows when a feature is shuffled"
    names = ", ".join(str(m) for m in pfi)
    subtitle = f"{names}; mean ± {first.uncertainty_words}; {inp.selection}"  # the title says it is a difference
    rel = max(res.relative_error() for res in pfi.values())
    settle = (
        f"Each bar's whisker is ± its {first.uncertainty_words}; the features that matter are known to ±{rel:.0%}"
        + (": ask for more repetitions to settle them." if rel > 0.1 else ".")
    )
    info = f"{first.n_rows:,} rows. {settle}"
    if first.n_pairs is not None:  # a subgroup's share of the all-rows permutations
        assert first.n_total is not None and first.row_std_error is not None
        worst = max(float(res.row_std_error.max()) for res in pfi.values())
        pairs = int(round(float(first.n_pairs.to_numpy().mean())))
        info = (
            f"On large data a subgroup's PFI reuses the permutations of all rows, so a subgroup switch runs no "
            f"model: {first.n_rows:,} of the subgroup's {first.n_total:,} rows are in their seeded sample, and "
            f"about {pairs:,} of them per permutation drew their shuffled value from a row of the subgroup too, "
            "as a shuffle within the subgroup would; the bars average those pairs. Each bar's label is its "
            f"standard error (largest ±{worst:.3g}). 'Use all rows' shuffles within all {first.n_total:,} rows "
            f"of the subgroup instead. {settle}"
        )
        sample = f"{pairs:,} row pairs per permutation, reused from all rows"
        subtitle = subtitle.replace(inp.selection, f"{sample}; {inp.selection}")
    elif first.sampled:
        assert first.n_total is not None and first.row_std_error is not None
        worst = max(float(res.row_std_error.max()) for res in pfi.values())
        info = (
            f"PFI on a seeded sample of {first.n_rows:,} of the {first.n_total:,} selected rows (to keep "
            f"{first.n_rows * len(first.features) * first.n_repeats:,} model rows per model): each bar's label is its "
            f"standard error from that sample (largest ±{worst:.3g}). 'Use all rows' computes on every row, "
            f"about {first.n_total / first.n_rows:.0f}x the time. {settle}"
        )
        sample = f"sample of {first.n_rows:,} of {first.n_total:,} rows"
        subtitle = subtitle.replace(inp.selection, f"{sample}; {inp.selection}")
    info = joined(info, engine_note(pfi))  # after how the numbers were computed, before what the rows are
    note = data_role_note(inp.ws, "pfi")
    info = f"{info} {note}" if note else info
    if inp.mask is not None:
        info += (
            " On a subgroup each feature is shuffled among the subgroup's rows only: a feature constant there "
            "(like one that defines the subgroup) gets 0, while the PFI within the subgroup (Subgroups, from the "
            "ICI curves) gives it its values from all rows."
        )
    dependent = partners_line(inp)
    info = f"{info} {dependent}" if dependent else info
    idle = idle_line(inp, pfi)
    info = f"{info} {idle}" if idle else info
    sampled = any(res.sampled or res.n_pairs is not None for res in pfi.values())
    if inp.state.get("sfimp") and first.n_total is not None:  # SFIMP's smaller sample: the same button
        sampled = sampled or first.n_total > (planning.sfimp_sample(len(first.features)) or first.n_total)
    return {
        "figure": figures.pfi_figure(pfi, selected=inp.feature, title=title, subtitle=subtitle, names=inp.names),
        "info": info,
        "reset_style": reset,
        "all_label": "Back to a sample" if inp.state.get("pfi_all") else "Use all rows",
        "all_style": {} if (sampled or inp.state.get("pfi_all")) else hidden,
    }


def idle_line(inp, pfi) -> str:
    """Why a feature's PFI is exactly 0 when it holds no values (all missing) or one value in
    the selected rows: shuffling it changes no prediction, and it has no curves either."""
    rows = inp.data if inp.mask is None else inp.data[inp.mask]
    said: list[str] = []
    if rows.empty:
        return ""
    for feature in next(iter(pfi.values())).features:
        if feature not in rows.columns or any(res.importance.get(feature) != 0.0 for res in pfi.values()):
            continue
        column = rows[feature]
        if column.isna().all():
            said.append(f"{inp.label(feature)} holds no values (all missing)")
        elif column.notna().all() and bool((column == column.iloc[0]).all()):
            said.append(f"{inp.label(feature)} holds one value ({_plain(column.iloc[0])})")
    if not said:
        return ""
    listed = said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]
    them, their, they = ("them", "their", "they have") if len(said) > 1 else ("it", "its", "it has")
    return f"{listed} in these rows, so shuffling {them} changes no prediction: {their} PFI is 0 and {they} no curves."


def _plain(value) -> str:
    """A value as people write it: 2, 0.5, US (never NumPy's repr)."""
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def library(inp) -> dict:
    """Each model's PFI bars and their whiskers (``uncertainty``: the standard error written
    after every "±"): ``compute.permutation_importance``'s result."""
    found: dict = {}
    for name, res in inp.pfi.items():
        found[f"{name}: PFI"], found[f"{name}: std_error"] = res.importance, res.uncertainty
    return found


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
        "figure": (PFI_GRAPH, "figure"),
        "info": (ids.PFI_INFO, "children"),
        "reset_style": (ids.REPEATS_RESET, "style"),
        "all_label": (ids.PFI_ALL, "children"),
        "all_style": (ids.PFI_ALL, "style"),
    },
    placeholder=lambda message: {
        "figure": empty(message),
        "info": "",
        "reset_style": {"display": "none"},
        "all_label": "Use all rows",
        "all_style": {"display": "none"},
    },
    render=render,
    body=lambda: [
        components.graph(PFI_GRAPH, height=None, filename="pfi"),
        html.Div(id=ids.PFI_INFO, className="help"),
    ],
    extra=lambda: [
        html.Button("Use all rows", id=ids.PFI_ALL, className="button small", style={"display": "none"}),
        html.Button(
            f"Back to {DEFAULT_REPEATS}", id=ids.REPEATS_RESET, className="button small", style={"display": "none"}
        ),
        html.Button("More repetitions", id=ids.REPEATS_MORE, className="button small"),
    ],
    needs=frozenset({PFI}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", sfimp.SFIMP_ON}),
    state=(REPEATS, PFI_ALL),
    selects=(Select(PFI_GRAPH, "feature"),),
    library=library,
)
