"""Views: cached results -> figures and tables. No model calls, no predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
from dash import Input, Output, State

import compute

from .. import figures, ids, jobs
from .compute import plan_state
from ..state import clean_state
from .drilldown import normalize

N_INFLUENTIAL = 10


def _load(ctx, results):
    """State, workspace, data, subgroup mask and cache keys of a results record (None when
    not ready). The keys are planned again from the state, never taken from the browser."""
    if not results or "keys" not in results or not isinstance(results.get("state"), dict):
        return None
    state = results["state"]
    ws = ctx.store.workspace(state.get("ws"))
    if ws is None:
        return None
    state, _ = normalize(ctx, dict(state))
    data = ctx.store.data(ws)
    mask = jobs.select_rows(data, state["subgroup"]) if state.get("subgroup") else None
    keys = plan_state(ctx, ws, state)["keys"]
    return state, ws, data, mask, keys


def _stale(message: str):
    return figures.empty_figure(message)


def global_views(ctx, results):
    """PFI bars, SFIMP bars, conditional PFI table, global CI, impact table, subgroup size."""
    loaded = _load(ctx, results)
    if loaded is None:
        message = (results or {}).get("error") or "Waiting for results…"
        empty = figures.empty_figure(message)
        return empty, "", empty, "", [], [], empty, [], [], ""
    state, ws, data, mask, keys = loaded
    summary = ctx.store.get(keys["summary"])
    pfi = {name: ctx.store.get(key) for name, key in keys["pfi"].items()}
    pfi = {name: frame for name, frame in pfi.items() if frame is not None}
    selection = _selection_label(state, data, mask)
    any_pfi = next(iter(pfi.values()), None)
    title = None
    if any_pfi is not None:
        n_rep = sum(c.startswith("repeat_") for c in any_pfi.columns)
        title = (f"PFI ({any_pfi.attrs.get('kind', 'difference')} in {any_pfi.attrs.get('loss', ws.loss)}), "
                 f"mean ± std over {n_rep} permutations, {selection}")
    pfi_fig = figures.pfi_figure(pfi, selected=state["feature"], title=title) if pfi else _stale("No PFI yet")
    spread = ""
    if any_pfi is not None:
        rel = (any_pfi["std"] / any_pfi["importance"].abs().clip(lower=1e-12)).max()
        spread = (f"{any_pfi.attrs.get('n_rows', len(data))} rows; largest relative spread {rel:.0%}"
                  + (" — wide: ask for more repetitions." if rel > 0.2 else "."))
    if keys.get("sfimp"):
        sfimp = {name: ctx.store.get(key) for name, key in keys["sfimp"].items()}
        sfimp = {k: v for k, v in sfimp.items() if v is not None}
        sfimp_fig = figures.sfimp_figure(sfimp, selected=state["feature"])
        sfimp_info = "; ".join(
            f"{name}: {'exact' if s.exact else f'{s.n_orderings} orderings'}, {s.n_rows:,} model rows, "
            f"error {s.model_error:.4g} vs {s.baseline_error:.4g} with no feature"
            for name, s in sfimp.items())
    else:
        sfimp_fig = figures.empty_figure("Press “Compute SFIMP” (it costs many model calls).")
        sfimp_info = ""
    if summary is None:
        empty = figures.empty_figure("Waiting for the ICE/ICI pass…")
        return pfi_fig, spread, sfimp_fig, sfimp_info, [], [], empty, [], [], selection
    table = summary.conditional_pfi(mask, state.get("exclude"))
    counts = table.attrs["counts"]
    table.columns = [f"{c} (n={counts[c]})" for c in table.columns]
    pfi_rows, pfi_cols = figures.table_data(table, index_name="feature")
    gci = summary.global_ci(mask)
    gci_fig = figures.global_ci_figure(gci, selected=state["feature"])
    impact = summary.impact.copy()
    impact["pd_importance"] = summary.pd_importance
    impact_rows, impact_cols = figures.table_data(impact, index_name="feature")
    return pfi_fig, spread, sfimp_fig, sfimp_info, pfi_rows, pfi_cols, gci_fig, impact_rows, impact_cols, selection


def _selection_label(state, data, mask) -> str:
    if mask is None:
        text = f"all {len(data)} rows"
    else:
        text = f"subgroup {state['subgroup']}: {int(mask.sum())} of {len(data)} rows"
    if state.get("exclude"):
        text += f", {len(state['exclude'])} excluded"
    return text


def feature_views(ctx, results):
    """PI, ICI, ICE, ALE figures and the influential-observations table of the feature."""
    loaded = _load(ctx, results)
    if loaded is None:
        message = (results or {}).get("error") or "Waiting for results…"
        empty = figures.empty_figure(message)
        return empty, empty, empty, [], [], "", empty, []
    state, ws, data, mask, keys = loaded
    feature = state["feature"]
    prof = ctx.store.get(keys["profiles"].get(feature, ""))
    summary = ctx.store.get(keys["summary"])
    if prof is None or summary is None:
        empty = figures.empty_figure("Waiting for the ICE/ICI pass…")
        return empty, empty, empty, [], [], "", empty, []
    prof_mask = None
    groups = None
    if mask is not None:
        prof_mask = mask.reindex(prof.rows).fillna(False).to_numpy(bool)
        groups = {state["subgroup"]: prof_mask, f"not ({state['subgroup']})": ~prof_mask}
    selected = _row_label(state.get("obs"), prof.rows)
    global_pfi = float(summary.local[feature].mean())
    pi_fig = figures.pi_figure(prof, groups, global_pfi=global_pfi, x_all=data[feature].to_numpy())
    eligible = prof_mask if (prof_mask is not None and prof_mask.any()) else None
    ici_fig = figures.ici_figure(prof, selected=selected, mask=eligible)
    ice_fig = figures.ice_figure(prof, selected=selected, mask=eligible, centered=bool(state.get("centered")))
    table = summary.influential(feature, N_INFLUENTIAL, eligible)
    info = (f"{table.attrs['n_negative']} of {table.attrs['n']} observations have a negative ICI integral "
            f"for {feature}.")
    rows, cols = figures.table_data(table, index_name="row")
    for record, label in zip(rows, table.index):  # DataTable's active_cell.row_id: sort/page proof
        record["id"] = str(label)
    negative = [str(r) for r in prof.rows[prof.local_importance < 0]]
    if prof.categorical:
        ale_fig = figures.empty_figure(f"ALE needs a numeric feature; {feature} is categorical.")
    else:
        try:
            ale_fig = figures.ale_figure(compute.ale_from_profile(prof), feature=feature)
        except compute.ExplainError as exc:
            ale_fig = figures.empty_figure(str(exc))
    return pi_fig, ici_fig, ice_fig, rows, cols, info, ale_fig, negative


def _row_label(value, rows: pd.Index):
    if value is None:
        return None
    label = jobs.row_label(value, rows)
    return label if label in rows else None


def selected_row(summary: compute.ProfileSummary, state: dict, mask) -> tuple:
    """The observation CIU explains and how it was chosen: the selected one if it is among
    the explained rows, else the most influential row of the feature (in the subgroup), by
    the summary's one ranking rule."""
    row = _row_label(state.get("obs"), summary.rows)
    if row is not None:
        return row, f"row {row}"
    inside = None
    if mask is not None:
        inside = mask.reindex(summary.rows).fillna(False).to_numpy(bool)
        inside = inside if inside.any() else None
    row = summary.influential(state["feature"], 1, inside).index[0]
    where = " in the subgroup" if inside is not None else ""
    note = " (the selected one is not among the explained rows)" if state.get("obs") is not None else ""
    return row, (f"no observation selected{note}: showing row {row}, the largest ICI integral{where} "
                 f"for {state['feature']}")


def observation_views(ctx, results):
    """CIU and influence of the selected observation (default: the largest ICI integral)."""
    loaded = _load(ctx, results)
    if loaded is None:
        empty = figures.empty_figure((results or {}).get("error") or "Waiting for results…")
        return empty, empty, "", [], []
    state, ws, data, mask, keys = loaded
    summary = ctx.store.get(keys["summary"])
    if summary is None:
        empty = figures.empty_figure("Waiting for the ICE/ICI pass…")
        return empty, empty, "", [], []
    row, how = selected_row(summary, state, mask)
    local = summary.local[state["feature"]]
    ciu = summary.ciu(row)
    output = f" of P({ws.output})" if ws.output is not None else ""
    title = f"CIU{output}, {how}"
    ciu_fig = figures.ciu_figure(ciu, title=title)
    infl_fig = figures.influence_figure(ciu)
    label = jobs.row_label(row, data.index)
    values = data.loc[label].to_frame("value")
    values.loc["prediction"] = float(summary.base_pred.loc[row])
    values.loc[f"ICI integral ({state['feature']})"] = float(local.loc[row])
    values["value"] = values["value"].astype(str)
    obs_rows, obs_cols = figures.table_data(values, index_name="column")
    info = f"Selected: {how}. Output range for CI: {summary.out_range[0]:.4g} … {summary.out_range[1]:.4g}."
    return ciu_fig, infl_fig, info, obs_rows, obs_cols


def hover_text(ctx, hover, state) -> str:
    """The hovered curve's observation: its row label and feature values, one line."""
    row = None
    try:
        row = hover["points"][0].get("customdata")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    if not isinstance(row, (str, int)) or isinstance(row, bool) or not isinstance(state, dict):
        return ""
    ws = ctx.store.workspace(clean_state(state)["ws"])
    if ws is None:
        return ""
    data = ctx.store.data(ws)
    label = jobs.row_label(row, data.index)
    if label not in data.index:
        return ""
    values = data.loc[label]
    shown = ", ".join(f"{c} = {_short(v)}" for c, v in values.items())
    return f"row {row}: {shown}"


def _short(value) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 24 else text[:23] + "…"


def register(app, ctx) -> None:
    @app.callback(
        Output(ids.HOVER_INFO, "children"),
        Input(ids.ICI_GRAPH, "hoverData"),
        Input(ids.ICE_GRAPH, "hoverData"),
        State(ids.STATE, "data"),
        prevent_initial_call=True,
    )
    def hovered(ici_hover, ice_hover, state):
        from dash import ctx as dash_ctx

        hover = ici_hover if dash_ctx.triggered_id == ids.ICI_GRAPH else ice_hover
        return hover_text(ctx, hover, state)

    @app.callback(
        Output(ids.PFI_GRAPH, "figure"),
        Output(ids.PFI_INFO, "children"),
        Output(ids.SFIMP_GRAPH, "figure"),
        Output(ids.SFIMP_INFO, "children"),
        Output(ids.PFI_TABLE, "data"),
        Output(ids.PFI_TABLE, "columns"),
        Output(ids.GLOBAL_CI_GRAPH, "figure"),
        Output(ids.IMPACT_TABLE, "data"),
        Output(ids.IMPACT_TABLE, "columns"),
        Output(ids.SUBGROUP_SIZE, "children"),
        Input(ids.RESULTS, "data"),
    )
    def render_global(results):
        return global_views(ctx, results)

    @app.callback(
        Output(ids.PI_GRAPH, "figure"),
        Output(ids.ICI_GRAPH, "figure"),
        Output(ids.ICE_GRAPH, "figure"),
        Output(ids.ICI_TABLE, "data"),
        Output(ids.ICI_TABLE, "columns"),
        Output(ids.ICI_INFO, "children"),
        Output(ids.ALE_GRAPH, "figure"),
        Output(ids.NEGATIVE, "data"),
        Input(ids.RESULTS, "data"),
    )
    def render_feature(results):
        return feature_views(ctx, results)

    @app.callback(
        Output(ids.CIU_GRAPH, "figure"),
        Output(ids.INFLUENCE_GRAPH, "figure"),
        Output(ids.OBS_INFO, "children"),
        Output(ids.OBS_TABLE, "data"),
        Output(ids.OBS_TABLE, "columns"),
        Input(ids.RESULTS, "data"),
    )
    def render_observation(results):
        return observation_views(ctx, results)
