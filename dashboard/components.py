"""The building blocks of the page's panels (a graph, a table, a panel, an error line):
functions that build components and compute nothing. Views and the page layout use them."""

from __future__ import annotations

from dash import dash_table, dcc, html


def graph(graph_id: str, *, height: int | None = None, filename: str | None = None) -> dcc.Graph:
    """A graph of fixed height, or (height=None) as tall as its figure's layout says."""
    return dcc.Graph(
        id=graph_id,
        style={"height": f"{height}px"} if height else {"minHeight": "120px"},  # figures set their height
        config={
            "displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": filename or graph_id, "scale": 2},
        },
    )


def table(table_id: str, *, page_size: int = 12, row_selectable=None):
    return dash_table.DataTable(  # type: ignore[attr-defined]
        id=table_id,
        page_size=page_size,
        sort_action="native",
        style_table={"overflowX": "auto"},
        style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "3px 8px", "textAlign": "right"},
        style_header={"fontWeight": "600", "backgroundColor": "#f3f4f6"},
        row_selectable=row_selectable,
    )


def panel(
    title: str,
    *children,
    help_text: str | None = None,
    extra=None,
    class_name: str = "panel",
    method: str = "",
    panel_id: str | None = None,
):
    """A view's panel: its title, its tools, its question in plain words and (hover or focus
    the "method" mark) the method with its paper and equation."""
    header: list = [html.H3(title)]
    if extra is not None:
        header.append(html.Div(extra, className="panel-tools"))
    body: list = [html.Div(header, className="panel-header")]
    if help_text:
        note = [html.Span(" method", title=method, className="method-note", tabIndex="0")] if method else []
        body.append(html.P([help_text, *note], className="help question"))
    body.extend(children)
    if panel_id:
        return html.Section(body, className=class_name, id=panel_id)
    return html.Section(body, className=class_name)


def error_line(error_id: str) -> html.Div:
    return html.Div(id=error_id, className="field-error", role="alert")
