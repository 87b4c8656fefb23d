/* Presentation mode (the page's class "present", see style.css): every chart's text at 16 px
   or more, for a projector at the back of a room.

   Plotly draws text at the sizes its figure names and lays its margins out from them, so CSS
   cannot enlarge chart text without cutting labels. The figure's own layout is changed here
   instead (Plotly.relayout / restyle: Plotly lays the text out again, automargins included),
   and put back when the mode is left. A figure the server sends anew (Dash's Plotly.react)
   comes with its usual sizes and is enlarged again after it is drawn. The server's figures,
   the state and every cache entry stay as they are: this is how the page looks, not what it
   computes. */
(function () {
  'use strict';
  var MIN = 16;    // every text: axes, ticks, legends, annotations, bar labels, hover boxes
  var TITLE = 18;  // the chart's title
  var DEFAULT = 12;  // Plotly's size where the figure names none

  function presenting() {
    var page = document.getElementById('page');
    return !!(page && page.classList.contains('present'));
  }

  function get(obj, path) {
    return path.split('.').reduce(function (o, k) { return o == null ? undefined : o[k]; }, obj);
  }

  // [[path, size now (undefined: Plotly's default), size wanted]] for the layout's text
  function layoutWants(layout) {
    var wants = [];
    function need(path, now, least) {
      if ((now === undefined ? DEFAULT : now) < least) { wants.push([path, now, least]); }
    }
    need('font.size', get(layout, 'font.size'), MIN);
    need('hoverlabel.font.size', get(layout, 'hoverlabel.font.size'), MIN);
    if (get(layout, 'title.text')) {
      need('title.font.size', get(layout, 'title.font.size'), TITLE);
      // the larger title's first line a little lower: its ascenders not at the chart's edge
      var pad = get(layout, 'title.pad.t');
      if ((pad || 0) < 6) { wants.push(['title.pad.t', pad, 6]); }
    }
    if (get(layout, 'title.subtitle.text')) {
      need('title.subtitle.font.size', get(layout, 'title.subtitle.font.size'), MIN);
    }
    ['legend.font.size', 'legend.title.font.size'].forEach(function (path) {
      var size = get(layout, path);
      if (size !== undefined) { need(path, size, MIN); }
    });
    Object.keys(layout).forEach(function (key) {
      if (!/^(x|y)axis\d*$/.test(key)) { return; }
      ['tickfont.size', 'title.font.size'].forEach(function (part) {
        var size = get(layout, key + '.' + part);
        if (size !== undefined) { need(key + '.' + part, size, MIN); }
      });
    });
    (layout.annotations || []).forEach(function (note, i) {
      var size = get(note, 'font.size');
      if (size !== undefined) { need('annotations[' + i + '].font.size', size, MIN); }
    });
    return wants;
  }

  // [[trace index, size now]] for traces whose text (bar labels, heatmap cells) is smaller
  function traceWants(data) {
    var wants = [];
    (data || []).forEach(function (trace, i) {
      var size = get(trace, 'textfont.size');
      if (typeof size === 'number' && size < MIN) { wants.push([i, size]); }
    });
    return wants;
  }

  // The enlarged figure is a copy: Dash's figure (its props: the layout and data objects it
  // gave Plotly) is never changed, so a chart Dash draws again, into this element or a new
  // one, is the server's; the copy keeps that figure (not enumerable: Plotly never walks it)
  // and leaving the mode draws it again.
  var ORIGINAL = 'wipPresentOriginal';

  function copy(value) {
    return JSON.parse(JSON.stringify(value));
  }

  function setPath(obj, path, value) {
    var keys = path.replace(/\[(\d+)\]/g, '.$1').split('.');
    var at = obj;
    keys.slice(0, -1).forEach(function (k) {
      if (at[k] == null || typeof at[k] !== 'object') { at[k] = {}; }
      at = at[k];
    });
    at[keys[keys.length - 1]] = value;
  }

  function draw(gd, data, layout) {
    return Plotly.react(gd, {data: data, layout: layout, config: gd._context});
  }

  function enlarge(gd) {
    var wants = layoutWants(gd.layout || {});
    var traces = traceWants(gd.data);
    if (!wants.length && !traces.length) { return null; }
    var original = gd.layout[ORIGINAL] || {data: gd.data, layout: gd.layout};
    var layout = copy(gd.layout);
    wants.forEach(function (w) { setPath(layout, w[0], w[2]); });
    Object.defineProperty(layout, ORIGINAL, {value: original, enumerable: false});
    var resized = {};
    traces.forEach(function (t) { resized[t[0]] = true; });
    var data = (gd.data || []).map(function (trace, i) {
      if (!resized[i]) { return trace; }
      return Object.assign({}, trace, {textfont: Object.assign({}, trace.textfont, {size: MIN})});
    });
    return draw(gd, data, layout);
  }

  function restore(gd) {
    var original = gd.layout && gd.layout[ORIGINAL];
    return original ? draw(gd, original.data, original.layout) : null;
  }

  function settle(gd) {
    if (!window.Plotly || !gd.layout || gd.__wipBusy) { return; }
    var step = presenting() ? enlarge(gd) : restore(gd);
    if (!step) { return; }
    gd.__wipBusy = true;  // our own relayout draws the chart again: not a new figure
    step.catch(function () { return null; }).then(function () {
      gd.__wipBusy = false;
      settle(gd);  // a figure that arrived meanwhile, or the mode left meanwhile
    });
  }

  function every() {
    document.querySelectorAll('.js-plotly-plot').forEach(function (gd) {
      if (!gd.__wipWatched && typeof gd.on === 'function') {
        gd.__wipWatched = true;
        gd.on('plotly_afterplot', function () { settle(gd); });
      }
      settle(gd);
    });
  }

  var queued = false;
  function soon() {
    if (queued) { return; }
    queued = true;
    window.requestAnimationFrame(function () { queued = false; every(); });
  }

  function start() {
    // the page's class (the mode) and new charts (a section opened, a view drawn)
    new MutationObserver(function (changes) {
      for (var i = 0; i < changes.length; i++) {
        var c = changes[i];
        if (c.type === 'childList' || (c.target && c.target.id === 'page')) { soon(); return; }
      }
    }).observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ['class']});
    soon();
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
