"""Export: each view's CSV downloads and the one-file HTML report, from the registry."""

from __future__ import annotations

from urllib.parse import urlsplit

from dash import Input, Output, State, no_update
from dash import ctx as dash_ctx
from flask import request

from .. import ids, views
from ..html_report import report_html
from ..quota import client_key

REPORTS_PER_MINUTE = 6  # a report renders every view and carries plotly.js (~5 MB): a few a minute


def report_base(href) -> str:
    """The page's address for the report's link back, from the browser's ``location.href``:
    only an http(s) address without credentials (a forged ``javascript:`` or ``data:`` URL
    never becomes a link in a file others open)."""
    if not isinstance(href, str) or len(href) > 2000:
        return ""
    try:
        parts = urlsplit(href)
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return ""
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def register(app, ctx) -> None:
    buttons = list(views.exports())

    @app.callback(
        Output(ids.DOWNLOAD, "data"),
        Output(ids.STATUS, "children", allow_duplicate=True),
        *[Input(b, "n_clicks") for b in buttons],
        Input(ids.EXPORT_REPORT, "n_clicks"),
        State(ids.RESULTS, "data"),
        State(ids.URL, "href"),
        prevent_initial_call=True,
    )
    def download(*args):
        results, href = args[-2], args[-1]
        which = dash_ctx.triggered_id
        if which == ids.EXPORT_REPORT:
            wait = ctx.slots.admit(client_key(request.remote_addr), "report", REPORTS_PER_MINUTE)
            if wait:
                return no_update, (
                    f"At most {REPORTS_PER_MINUTE} reports a minute per visitor: the next one in {wait} s."
                )
            text = report_html(ctx, results, report_base(href))
            if text is None:
                return no_update, no_update
            return dict(content=text, filename="feature-importance-report.html"), no_update
        out = views.export(ctx, which, results)
        return (no_update if out is None else out), no_update
