"""The drill-down's browser-side callbacks (JavaScript run by Dash's clientside callbacks):
clicks and hovers on curves to a row, the what-if form and the suggested subgroups to one
store each, a finding's link to its view, and presentation mode to the page's class."""

# A click on a curve: its row label from the point's customdata, or (WebGL traces leave
# typed-array customdata out of click events) from the graph's data by point number.
CLICKED_ROW_JS = """
function(iciClick, iceClick) {
    const trig = (dash_clientside.callback_context.triggered || [])[0];
    if (!trig) { return dash_clientside.no_update; }
    const graphId = trig.prop_id.split('.')[0];
    const click = graphId === 'ici-graph' ? iciClick : iceClick;
    const point = click && click.points && click.points[0];
    if (!point) { return dash_clientside.no_update; }
    let row = point.customdata;
    if (row === undefined || row === null) {
        const gd = document.querySelector('#' + graphId + ' .js-plotly-plot');
        const trace = gd && gd._fullData && gd._fullData[point.curveNumber];
        const data = trace && trace.customdata;
        row = data ? data[point.pointNumber] : undefined;
    }
    if (row === undefined || row === null) { return dash_clientside.no_update; }
    return {row: row, t: Date.now()};
}
"""

# A link to a view (a finding's "see the chart"): open its section, then scroll its panel
# into view once the section is drawn.
VIEW_LINK_JS = """
function(clicks) {
    const trig = (dash_clientside.callback_context.triggered || [])[0];
    if (!trig || !trig.value) { return dash_clientside.no_update; }
    const id = JSON.parse(trig.prop_id.split('.')[0]);
    let tries = 0;
    const scroll = function() {
        const panel = document.getElementById('view-' + id.view);
        if (panel) { panel.scrollIntoView({block: 'start'}); panel.focus({preventScroll: true}); }
        else if (tries++ < 40) { setTimeout(scroll, 50); }
    };
    setTimeout(scroll, 30);
    return id.section;
}
"""

# The same mapping for hovers (WebGL drops customdata from hover events as well).
HOVERED_ROW_JS = CLICKED_ROW_JS

PRESENT_JS = """
function(state, datasets, models) {
    const on = !!(state && state.present);
    const named = function(options, value) {
        const found = (options || []).find(function(o) {
            return (o && o.value !== undefined ? o.value : o) === value;
        });
        return found === undefined ? '' : String(found && found.label !== undefined ? found.label : found);
    };
    const names = (models || []).map(function(m) { return String(m && m.label !== undefined ? m.label : m); });
    const parts = [];
    const dataset = named(datasets, state && state.ws);
    if (dataset) { parts.push('Data: ' + dataset); }
    if (names.length) { parts.push((names.length > 1 ? 'models: ' : 'model: ') + names.join(', ')); }
    parts.push(state && state.subgroup ? 'rows where ' + state.subgroup : 'all rows');
    return [
        on ? 'page present' : 'page',
        on ? 'true' : 'false',
        on ? 'Leave presentation mode' : 'Presentation mode',
        parts.join(' \u00b7 '),
    ];
}
"""


# The what-if form's fields (pattern-matching ids, drawn by the what-if view) -> one store the
# controller reads: every field's value, for the row the form was drawn for.
WHATIF_JS = """
function(values, fieldIds) {
    if (!fieldIds || !fieldIds.length) { return dash_clientside.no_update; }
    const edit = {};
    fieldIds.forEach(function(id, i) {
        const v = values[i];
        if (v !== null && v !== undefined && v !== '') { edit[id.column] = v; }
    });
    return {row: fieldIds[0].row, edit: edit, t: Date.now()};
}
"""


# A suggested subgroup's button (pattern-matching ids carry the condition) -> one store the
# controller reads. Buttons drawn anew (n_clicks empty) do not count as a click.
SUGGESTED_JS = """
function(clicks, buttonIds) {
    const ctx = dash_clientside.callback_context;
    const trig = (ctx.triggered || [])[0];
    if (!trig || !trig.value) { return dash_clientside.no_update; }
    let id = ctx.triggered_id;
    if (!id || typeof id !== 'object') {
        try { id = JSON.parse(trig.prop_id.slice(0, trig.prop_id.lastIndexOf('.'))); }
        catch (e) { return dash_clientside.no_update; }
    }
    if (!id || typeof id.condition !== 'string') { return dash_clientside.no_update; }
    return {condition: id.condition, t: Date.now()};
}
"""
