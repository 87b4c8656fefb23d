"""Export: each view's CSV downloads and the one-file HTML report, from the registry."""

from __future__ import annotations

from dash import Input, Output, State, no_update
from dash import ctx as dash_ctx

from .. import ids


def register(app, ctx) -> None:
    from .. import views  # the view modules import the callbacks' planning functions

    buttons = list(views.exports())

    @app.callback(
        Output(ids.DOWNLOAD, "data"),
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
            text = views.report_html(ctx, results, (href or "").split("?")[0] if isinstance(href, str) else "")
            return no_update if text is None else dict(content=text, filename="feature-importance-report.html")
        out = views.export(ctx, which, results)
        return no_update if out is None else out
