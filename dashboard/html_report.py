"""The one-file HTML report of a drill-down: every section's views with results, their
figures, tables and notes, for a reader without the app (the page's "Download HTML report",
``app.py report`` and ``dashboard.report``). The views are the registry's; a view adds to
the report through ``View.report`` only."""

from __future__ import annotations

import datetime as dt
import html as html_lib

import compute
from compute.losses import LOSS_LABELS

from .state import search_from_state
from .view_render import draw
from .views import REGISTRY, SECTIONS, load_inputs, render
from .views.base import Inputs, figure_html, is_figure_ready, table_html, text_html


def report_html(ctx, results, base_url: str = "") -> str | None:
    """One self-contained HTML document of the current drill-down, for a reader without the
    app: what data and models it is about and which rows and observation it looks at, then
    each section with its question and each view that has results (its one-line method, its
    figures with their axis titles, its tables and notes). Views not computed are left out:
    no "press Compute" placeholders."""
    inp = load_inputs(ctx, results)
    if inp is None:
        return None
    esc = html_lib.escape
    parts, first = [], True
    for key, label, question in SECTIONS:
        sections = []
        for view in (v for v in REGISTRY if v.section == key):
            try:
                out = draw(ctx, view, inp)
            except compute.ExplainError as exc:  # the reader learns why this view is not there
                sections.append(
                    f"<section><h3>{esc(view.title)}</h3><p class='question'>{esc(view.question)}</p>"
                    f"<p class='failed'>{esc(str(exc))}</p></section>"
                )
                continue
            except Exception:  # noqa: BLE001 - a bug: render() logs it and gives the placeholder
                out = render(ctx, view, results, inp)
            by_component: dict = {}
            for name, (cid, prop) in view.outputs.items():
                by_component.setdefault(cid, {})[prop] = out[name]
            shown, notes = [], []
            for props in by_component.values():
                if is_figure_ready(props.get("figure")):
                    shown.append(figure_html(props["figure"], first=first))
                    first = False
                elif props.get("data") and props.get("columns"):
                    shown.append(table_html(props["data"], props["columns"]))
                elif isinstance(props.get("children"), str) and props["children"]:
                    notes.append(text_html(props["children"]))
            if view.report is not None:  # what the view shows as components (lists, cards), as HTML
                shown += [part for part in view.report(out) if part]
            if shown:  # views with nothing computed are left out
                sections.append(
                    f"<section><h3>{esc(view.title)}</h3><p class='question'>{esc(view.question)}</p>"
                    + "".join(shown)
                    + "".join(notes)
                    + (f"<p class='method'>Method: {esc(view.method)}</p>" if view.method else "")
                    + "</section>"
                )
        if sections:
            parts.append(f"<h2>{esc(label)}</h2><p class='lead'>{esc(question)}</p>" + "".join(sections))
    link = base_url + search_from_state(inp.state)
    style = (
        "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1f2937}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;font-size:13px}"
        "section{margin:1em 0 2em}.question{color:#4b5563}.lead{font-size:1.05em}h2{border-bottom:2px solid #1d4ed8;"
        "padding-bottom:4px;margin-top:2em}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}"
        "dt{color:#4b5563}dd{margin:0}.method{color:#6b7280;font-size:13px}"
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Why it performs: {esc(inp.ws.title)}</title><style>{style}</style></head><body>"
        f"<h1>Why the model performs as it does</h1>{_report_summary(inp, link)}" + "".join(parts) + "</body></html>"
    )


def _report_summary(inp: Inputs, link: str) -> str:
    """The report's opening: the data and models, the rows and observation looked at."""
    esc = html_lib.escape
    ws, state = inp.ws, inp.state
    roles = {"held-out": "held out (the models did not train on it)", "training": "the models' training data"}
    explained = f"; explained class: {inp.class_label(ws.output)}" if ws.output is not None else ""
    target = f"{ws.target} ({ws.task}{explained})"
    facts = [
        ("Data", f"{ws.title}: {len(inp.data):,} rows"),
        ("Target", target),
        ("Models", ", ".join(m.name for m in ws.models) + f" (curves and CIU for {state['model']})"),
        ("Loss", LOSS_LABELS.get(str(ws.loss), str(ws.loss))),
        ("The rows are", roles.get(getattr(ws, "data_role", "unknown"), "not said at Load (training data or not)")),
        ("Rows looked at", inp.rows_line),
        ("Feature", inp.label(state["feature"])),
    ]
    if state.get("obs") is not None:
        edits = state.get("edit") or {}
        what = f"row {state['obs']}" + (
            " with " + ", ".join(f"{inp.label(k)} = {v}" for k, v in edits.items()) + " (what-if)" if edits else ""
        )
        facts.append(("Observation", what))
    facts.append(("Generated", dt.datetime.now().isoformat(timespec="seconds")))
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    if not link.startswith(("http://", "https://")):  # written without a server (command line, report()): no link
        return f"<dl>{rows}</dl>"
    server = link.split("?", 1)[0]
    return (
        f"<dl>{rows}</dl><p>Made with the dashboard at {esc(server)}. While that server runs, this link opens "
        f'the same drill-down there: <a href="{esc(link)}">{esc(link)}</a></p>'
    )
