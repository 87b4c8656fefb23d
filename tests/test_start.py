"""Issue 43, item 5: `python app.py --model M --data D --target T` printed a `?ws=` address,
but its root address (the one README tells people to open) still opened the X3 demo. The
root address now opens the operator's data set; an address naming a data set keeps it; a
server started without one opens the demo again."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import Ridge

from dashboard import ids
from dashboard.callbacks.drilldown import update_state
from dashboard.config import Config
from dashboard.doors import open_workspace
from dashboard.server import create_app
from dashboard.start import NAME, set_start, start_ws


@pytest.fixture()
def ctx(tmp_path):
    return create_app(Config(cache_dir=str(tmp_path / "cache")))._wip_context


def _first(ctx, search: str) -> str:
    state, _ = update_state(ctx, None, ids.URL, {"search": search})
    return state["ws"]


def test_the_root_address_opens_the_operators_data_set(ctx):
    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "y"])
    ws = open_workspace(ctx, {"ridge": Ridge().fit(data[["a", "b"]], data.y)}, data, "y", title="mine")
    assert _first(ctx, "") == "demo-x3"  # nothing given at start: the demo
    set_start(ctx, ws.id)
    assert start_ws(ctx) == ws.id
    assert _first(ctx, "") == ws.id and _first(ctx, "?feature=b") == ws.id
    assert _first(ctx, "?ws=demo-cancer") == "demo-cancer"  # an address naming a data set keeps it
    set_start(ctx, None)  # started again without a data set
    assert _first(ctx, "") == "demo-x3"


def test_a_start_file_naming_nothing_that_exists_opens_the_demo(ctx):
    for text in ("no-such-workspace", "../../etc/passwd", "x" * 500, ""):
        path = ctx.store.path(NAME)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        assert start_ws(ctx) is None and _first(ctx, "") == "demo-x3", text
