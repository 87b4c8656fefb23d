"""Pure figure builders: a result object in, a plotly ``go.Figure`` out.

No model calls, no I/O, nothing global set at import; the only randomness is a seeded
``np.random.default_rng(random_state)`` choosing which ICI/ICE curves to draw. Every bar and
curve point a user may click carries ``customdata`` naming the feature or the observation
(row label; the big curve trace keeps it a numeric array, sent as a compact typed array:
plotly.js leaves that out of a WebGL click event, so a clientside callback reads it from the
graph by point number), so callbacks read the selection from ``clickData`` and never from the figure's
data arrays.

Text a visitor controls (column names, levels, class and model names, subgroup text) is never
drawn as markup: Plotly draws a subset of HTML in every text it shows (links, styles). Callers
pass plain text. :func:`_style` escapes what holds only data (titles, subtitles, axis titles,
category values in x, y, ``categoryarray`` and ``tickvals``, trace names); builders escape
with :func:`esc` each name they write into text that holds our own markup (hover templates,
``hovertext``, ``text``, ``ticktext``), and hover shows the escaped axis value, never raw
``customdata``.

Papers: seed 000 = Casalicchio, Molnar & Bischl (2018), "Visualizing the Feature Importance
for Black Box Models" (PFI, PI/ICI curves, SFIMP); seed 003 = Främling (2022), contextual
importance and utility (CIU).

One module per family (:mod:`.theme`, :mod:`.common`, :mod:`.bars`, :mod:`.curves`,
:mod:`.ciu`, :mod:`.performance`); everything is imported here, so callers write
``figures.pfi_figure``.
"""

from __future__ import annotations

from .bars import (  # noqa: F401
    Bars,
    bar_figure,
    conditional_pfi_figure,
    convergence_figure,
    global_ci_figure,
    group_pfi_figure,
    influence_figure,
    pfi_figure,
    sfimp_figure,
)
from .ciu import (  # noqa: F401
    ciu_figure,
)
from .common import (  # noqa: F401
    _x_values,
    level_label,
    prediction_text,
    shown_name,
    shown_number,
    table_data,
    value_text,
)
from .curves import (  # noqa: F401
    ale_figure,
    ice_figure,
    ici_figure,
    pi_figure,
)
from .performance import (  # noqa: F401
    calibration_figure,
    scatter_figure,
    waterfall_figure,
    whatif_figure,
)
from .theme import (  # noqa: F401
    ALL_COLOR,
    BAR_COLOR,
    BEFORE_COLOR,
    CI_OPACITY,
    CURVE_COLOR,
    CURVE_OPACITY,
    DIAMOND,
    GROUP_COLORS,
    GROUP_DASHES,
    LARGEST_COLOR,
    LARGEST_STYLE,
    LEGEND_BELOW,
    MARGIN,
    MIN_HEIGHT,
    MISSING_LABEL,
    MODEL_COLORS,
    MODEL_PATTERNS,
    NEGATIVE_COLOR,
    OKABE_ITO,
    POSITIVE_COLOR,
    PX_PER_FEATURE,
    SELECTED_COLOR,
    SELECTED_STYLE,
    SMALLEST_COLOR,
    SMALLEST_STYLE,
    SYMBOLS,
    TEMPLATE,
    WARNING_COLOR,
    _figure,
    _style,
    add_subtitle,
    empty_figure,
    esc,
    model_style,
    signed,
)
