/* Charts by keyboard (issue 28): every chart can be reached with Tab and read and operated
 * with the keys alone.
 *
 * - Tab focuses a chart (a visible focus ring, style.css); its label names the chart and
 *   the keys.
 * - Left / Right move between the points of a series (on a series of many curves drawn as
 *   one, between the curves); Up / Down move between the series (a chart of one series:
 *   between its points, as on a bar chart); Home / End go to the first / last point.
 * - The point is shown as the mouse would show it (Plotly's hover label) and read out by a
 *   polite live region: series, x, y and the row it stands for.
 * - Enter or Space select it exactly as a click does: the chart emits Plotly's
 *   ``plotly_click`` with the point, which dcc.Graph turns into ``clickData`` (selecting a
 *   feature on a bar chart, an observation on a curve, a pair on the interaction matrix).
 * - Escape hides the label.
 */
(function () {
    "use strict";
    var KEYS = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "Enter", " ", "Escape"];
    var MANY = 1000; // a series with more points is many curves drawn as one: step curve by curve
    var HELP = "Arrow keys move between points and series, Enter selects.";

    function live() {
        var region = document.getElementById("chart-keyboard-live");
        if (!region) {
            region = document.createElement("div");
            region.id = "chart-keyboard-live";
            region.className = "visually-hidden";
            region.setAttribute("aria-live", "polite");
            document.body.appendChild(region);
        }
        return region;
    }

    function plot(graph) {
        return graph.querySelector(".js-plotly-plot");
    }

    function valid(trace, p) {
        var x = trace.x, y = trace.y;
        if (!x || !y) { return false; }
        return x[p] !== null && x[p] !== undefined && y[p] !== null && y[p] !== undefined &&
            !(typeof y[p] === "number" && isNaN(y[p]));
    }

    function series(gd) {
        var found = [];
        (gd._fullData || []).forEach(function (trace, c) {
            if (trace.visible !== true && trace.visible !== undefined) { return; } // hidden, or legend only
            if (trace.hoverinfo === "skip" || !trace.x || !trace.x.length) { return; }
            if (trace.type && ["bar", "scatter", "scattergl", "heatmap"].indexOf(trace.type) < 0) { return; }
            found.push(c);
        });
        return found;
    }

    function step(trace, p, direction) {
        var n = trace.x.length, cd = trace.customdata;
        var byCurve = n > MANY && cd;
        var q = p + direction;
        while (q >= 0 && q < n && (!valid(trace, q) || (byCurve && cd[q] === cd[p]))) { q += direction; }
        if (q < 0 || q >= n) { return p; }
        if (byCurve && direction < 0) { // back to the first point of that curve
            var first = q;
            for (var r = q - 1; r >= 0 && cd[r] === cd[q]; r--) {
                if (valid(trace, r)) { first = r; }
            }
            q = first;
        }
        return q;
    }

    function edge(trace, last) {
        var n = trace.x.length;
        for (var i = 0; i < n; i++) {
            var p = last ? n - 1 - i : i;
            if (valid(trace, p)) { return p; }
        }
        return 0;
    }

    function text(value) {
        if (typeof value === "number") { return Number(value.toPrecision(4)).toLocaleString("en"); }
        return String(value);
    }

    function describe(gd, c, p) {
        var trace = gd._fullData[c];
        var parts = [trace.name || "series " + (c + 1)];
        parts.push("x " + text(trace.x[p]), "y " + text(trace.y[p]));
        var cd = trace.customdata ? trace.customdata[p] : undefined;
        if (trace.type === "bar" && cd !== undefined && cd !== null) {
            parts[0] += ": " + text(cd); // a bar stands for a feature
        } else if (cd !== undefined && cd !== null && typeof cd !== "object") {
            parts.push("row " + text(cd)); // a curve's point stands for a row
        }
        return parts.join(", ");
    }

    function show(graph, gd, at) {
        try {
            window.Plotly.Fx.hover(gd, [{curveNumber: at.c, pointNumber: at.p}]);
        } catch (e) { /* a chart without hover: the live region still says it */ }
        live().textContent = describe(gd, at.c, at.p);
    }

    // a heatmap's cells: row i (y), column j (x); Left/Right move along x, Up/Down along y
    function cell(trace, i, j) {
        var z = trace.z && trace.z[i] ? trace.z[i][j] : undefined;
        return z !== undefined && z !== null && !(typeof z === "number" && isNaN(z));
    }

    function heatmapKey(event, graph, gd, c) {
        var trace = gd._fullData[c], rows = trace.z ? trace.z.length : 0, cols = trace.x ? trace.x.length : 0;
        if (!rows || !cols) { return; }
        var at = graph._keyboardCell;
        if (!at || at.c !== c || at.i >= rows || at.j >= cols) {
            at = graph._keyboardCell = {c: c, i: 0, j: 0};
            while (!cell(trace, at.i, at.j) && at.j + 1 < cols) { at.j += 1; }
        } else if (event.key === "Enter" || event.key === " ") {
            var point = {curveNumber: c, pointNumber: [at.i, at.j], x: trace.x[at.j], y: trace.y[at.i],
                z: trace.z[at.i][at.j], data: gd.data[c], fullData: trace};
            if (trace.customdata) { point.customdata = trace.customdata[at.i][at.j]; }
            gd.emit("plotly_click", {points: [point], event: event});
            live().textContent = "Selected: " + describeCell(trace, at);
            return;
        } else {
            var di = event.key === "ArrowDown" ? 1 : event.key === "ArrowUp" ? -1 : 0;
            var dj = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
            if (event.key === "Home") { at.j = 0; } else if (event.key === "End") { at.j = cols - 1; }
            var i = at.i + di, j = at.j + dj;
            while (i >= 0 && i < rows && j >= 0 && j < cols && !cell(trace, i, j) && (di || dj)) { i += di; j += dj; }
            if (i >= 0 && i < rows && j >= 0 && j < cols) { at.i = i; at.j = j; }
        }
        try {
            window.Plotly.Fx.hover(gd, [{curveNumber: c, pointNumber: [at.i, at.j]}]);
        } catch (e) { /* the live region still says it */ }
        live().textContent = describeCell(trace, at);
    }

    function describeCell(trace, at) {
        return (trace.name ? trace.name + ", " : "") + text(trace.y[at.i]) + " and " + text(trace.x[at.j]) +
            ": " + (cell(trace, at.i, at.j) ? text(trace.z[at.i][at.j]) : "no value");
    }

    function onKey(event) {
        if (KEYS.indexOf(event.key) < 0 || event.altKey || event.ctrlKey || event.metaKey) { return; }
        var graph = event.currentTarget, gd = plot(graph);
        if (!gd || !gd._fullData) { return; }
        var list = series(gd);
        if (!list.length) { return; }
        event.preventDefault(); // the page does not scroll while the chart has the keys
        if (event.key === "Escape") {
            try { window.Plotly.Fx.unhover(gd); } catch (e) { /* nothing shown */ }
            return;
        }
        if (gd._fullData[list[0]].type === "heatmap") {
            heatmapKey(event, graph, gd, list[0]);
            return;
        }
        var at = graph._keyboardPoint;
        if (!at || list.indexOf(at.c) < 0 || at.p >= gd._fullData[at.c].x.length) {
            at = {c: list[0], p: edge(gd._fullData[list[0]], false)};
            graph._keyboardPoint = at;
            show(graph, gd, at);
            if (event.key !== "Enter" && event.key !== " ") { return; }
        }
        var trace = gd._fullData[at.c], one = list.length === 1;
        if (event.key === "Enter" || event.key === " ") {
            var point = {curveNumber: at.c, pointNumber: at.p, pointIndex: at.p, x: trace.x[at.p], y: trace.y[at.p],
                data: gd.data[at.c], fullData: trace};
            if (trace.customdata) { point.customdata = trace.customdata[at.p]; }
            gd.emit("plotly_click", {points: [point], event: event});
            live().textContent = "Selected: " + describe(gd, at.c, at.p);
            return;
        }
        if (event.key === "Home" || event.key === "End") {
            at.p = edge(trace, event.key === "End");
        } else if (event.key === "ArrowLeft" || event.key === "ArrowRight" || one) {
            var forward = event.key === "ArrowRight" || event.key === "ArrowDown";
            at.p = step(trace, at.p, forward ? 1 : -1);
        } else {
            var i = list.indexOf(at.c) + (event.key === "ArrowDown" ? 1 : -1);
            if (i < 0 || i >= list.length) { return; }
            at.c = list[i];
            var next = gd._fullData[at.c];
            at.p = Math.min(at.p, next.x.length - 1);
            if (!valid(next, at.p)) { at.p = edge(next, false); }
        }
        show(graph, gd, at);
    }

    function label(graph) {
        var gd = plot(graph);
        var title = gd && gd.layout && gd.layout.title && gd.layout.title.text;
        var name = title ? String(title).replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").trim() : "Chart";
        graph.setAttribute("aria-label", name + ". " + HELP);
    }

    function setup(graph) {
        if (graph.dataset.keyboard) { return; }
        graph.dataset.keyboard = "1";
        graph.setAttribute("tabindex", "0");
        graph.setAttribute("role", "group");
        graph.setAttribute("aria-roledescription", "chart");
        label(graph);
        graph.addEventListener("keydown", onKey);
        graph.addEventListener("focus", function () { label(graph); });
    }

    function scan() {
        document.querySelectorAll(".dash-graph").forEach(setup);
    }

    new MutationObserver(scan).observe(document.documentElement, {childList: true, subtree: true});
    document.addEventListener("DOMContentLoaded", scan);
})();
