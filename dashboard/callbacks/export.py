"""Export: tables as CSV and a one-file HTML report of the current drill-down."""

from __future__ import annotations

import datetime as dt
import html as html_lib

import plotly.io as pio
from dash import Input, Output, State, ctx as dash_ctx, dcc, no_update

from .. import ids, jobs
from ..state import search_from_state
from . import views


def _frame_csv(frame, name):
    return dcc.send_data_frame(frame.to_csv, name)


def export_table(ctx, which: str, results):
    """A CSV download of one table of the current drill-down, or None when not ready."""
    loaded = views._load(ctx, results)
    if loaded is None:
        return None
    state, ws, data, mask, keys = loaded
    summary = ctx.store.get(keys["summary"])
    if which == ids.EXPORT_PFI:
        if summary is None:
            return None
        table = summary.conditional_pfi(mask, state.get("exclude"))
        for name, key in keys["pfi"].items():
            pfi = ctx.store.get(key)
            if pfi is not None:
                table[f"permutation PFI {name}"] = pfi["importance"]
                table[f"permutation std {name}"] = pfi["std"]
        return _frame_csv(table, "pfi.csv")
    if which == ids.EXPORT_ICI:
        prof = ctx.store.get(keys["profiles"].get(state["feature"], ""))
        if prof is None:
            return None
        frame = data.loc[prof.rows].copy()
        frame.insert(0, f"ici_integral_{state['feature']}", prof.local_importance)
        return _frame_csv(frame, f"ici-integrals-{state['feature']}.csv")
    if which == ids.EXPORT_CIU:
        if summary is None:
            return None
        row, _ = views.selected_row(summary, state, mask)
        return _frame_csv(summary.ciu(row), f"ciu-row-{row}.csv")
    return None


def report_html(ctx, results, base_url: str = "") -> str | None:
    """One self-contained HTML file (plotly.js inlined once) with the current views."""
    loaded = views._load(ctx, results)
    if loaded is None:
        return None
    state, ws, data, mask, _ = loaded
    glob = views.global_views(ctx, results)
    feat = views.feature_views(ctx, results)
    obs = views.observation_views(ctx, results)
    sections = [
        ("Permutation feature importance", glob[0], glob[1]),
        ("Shapley feature importance", glob[2], glob[3]),
        ("PI curves", feat[0], ""),
        ("ICI curves", feat[1], feat[5]),
        ("ICE curves and PD", feat[2], ""),
        ("CIU of the selected observation", obs[0], obs[2]),
        ("Contextual influence", obs[1], ""),
        ("Global contextual importance", glob[6], ""),
        ("Accumulated local effects", feat[6], ""),
    ]
    parts = []
    first = True
    for title, fig, note in sections:
        body = pio.to_html(fig, include_plotlyjs=first, full_html=False, config={"displaylogo": False})
        first = False
        parts.append(f"<section><h2>{html_lib.escape(title)}</h2><p>{html_lib.escape(str(note or ''))}</p>{body}</section>")
    tables = []
    for title, rows, cols in (("Conditional PFI (Eq. 9)", glob[4], glob[5]), ("ICE feature impact", glob[7], glob[8]),
                              ("Most and least influential observations", feat[3], feat[4])):
        head = "".join(f"<th>{html_lib.escape(str(c['name']))}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{html_lib.escape(str(r.get(c['id'], '')))}</td>" for c in cols) + "</tr>"
                       for r in rows)
        tables.append(f"<section><h2>{html_lib.escape(title)}</h2><table><tr>{head}</tr>{body}</table></section>")
    link = base_url + search_from_state(state)
    meta = (f"<p>Data: {html_lib.escape(ws.title)} · model: {html_lib.escape(state['model'])} · feature: "
            f"{html_lib.escape(state['feature'])} · subgroup: {html_lib.escape(state.get('subgroup') or 'none')} · "
            f"generated {dt.datetime.now().isoformat(timespec='seconds')}</p>"
            f"<p>Drill-down link: <a href=\"{html_lib.escape(link)}\">{html_lib.escape(link)}</a></p>")
    style = ("body{font-family:system-ui,sans-serif;margin:2em;color:#1f2937}table{border-collapse:collapse}"
             "td,th{border:1px solid #ddd;padding:2px 6px;font-size:13px}section{margin-bottom:2em}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Why it performs: report</title>"
            f"<style>{style}</style></head><body><h1>Feature importance report</h1>{meta}"
            + "".join(parts) + "".join(tables) + "</body></html>")


def register(app, ctx) -> None:
    @app.callback(
        Output(ids.DOWNLOAD, "data"),
        Input(ids.EXPORT_PFI, "n_clicks"),
        Input(ids.EXPORT_ICI, "n_clicks"),
        Input(ids.EXPORT_CIU, "n_clicks"),
        Input(ids.EXPORT_REPORT, "n_clicks"),
        State(ids.RESULTS, "data"),
        State(ids.URL, "href"),
        prevent_initial_call=True,
    )
    def download(_a, _b, _c, _d, results, href):
        which = dash_ctx.triggered_id
        if which == ids.EXPORT_REPORT:
            text = report_html(ctx, results, (href or "").split("?")[0])
            return no_update if text is None else dict(content=text, filename="feature-importance-report.html")
        out = export_table(ctx, which, results)
        return no_update if out is None else out
