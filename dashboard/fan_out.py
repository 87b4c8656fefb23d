"""The page's fan-out: the clientside callback that hands the results record to each view's
input store (:func:`dashboard.callbacks.views.register`), kept in a module of its own on the
standard library alone, so ``benchmarks/load_test.py`` reads the very script the page runs (it emulates
it for its simulated browsers and stops when the page serves another one)."""

from __future__ import annotations

import json

# The results record and the open section -> each view's input store. A view of the open
# section is drawn when its signature differs from the one it last drew; a view of another
# section is only blanked (a placeholder that holds no state, so once until it is drawn
# again: it never shows another state's numbers, and a click sends no request for it) and
# drawn when its section is opened. A record without signatures (an
# error) goes to every view.
FAN_OUT_JS = """
function(results, open) {
    const previous = Array.prototype.slice.call(arguments, 2);
    const names = %s, sections = %s;
    const sigs = (results && results.sigs) || null;
    return names.map(function(name, i) {
        const sig = sigs ? (sigs[name] || null) : null;
        const prev = previous[i];
        if (!sig) { return {results: results, sig: null}; }
        if (prev && prev.sig === sig) { return dash_clientside.no_update; }
        if (sections[i] !== open) {
            if (prev && prev.hidden) { return dash_clientside.no_update; }
            return {results: null, sig: null, hidden: sig};
        }
        return {results: results, sig: sig};
    });
}
"""
HIDDEN = "Drawing this view…"


def fan_out_js(names: list[str], sections: list[str]) -> str:
    """The script for views ``names`` in page order, each in its section."""
    return FAN_OUT_JS % (json.dumps(names), json.dumps(sections))
