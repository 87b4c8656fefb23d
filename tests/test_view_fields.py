"""Every state field a view owns comes through the same declaration (issue 45, items 2 and 6).

PFI's repetitions and "every row", SFIMP's switch and the centred ICE are fields their views
declare (``View(state=...)``), like the ALE view's K: the state's defaults, cleaning and URL and
the controller's inputs, reducers and outputs come from the declarations. A view reads its own
fields without listing them, and another view's through a reference to its Field: a view
reading a field no registered view declares fails when the registry is built, not on a
visitor's request.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from dashboard import ids, views
from dashboard.callbacks import drilldown
from dashboard.state import CORE_FIELDS, default_state, search_from_state, state_from_search, view_fields
from dashboard.views import ale, ale_range, base, ice, pfi, sfimp

MOVED = {"repeats": pfi, "pfi_all": pfi, "sfimp": sfimp, "centered": ice}


@pytest.mark.parametrize("name", sorted(MOVED))
def test_pfi_sfimp_and_ice_fields_are_their_views_own(name):
    """Declared by the view's module, in no hand-written list of the page's fields."""
    assert name not in CORE_FIELDS
    owner = next(v for v in views.REGISTRY if name in {f.name for f in v.state})
    assert owner is MOVED[name].VIEW
    assert name in {f.name for f in view_fields()}


def test_the_moved_fields_keep_their_defaults_and_urls():
    state = default_state()
    assert (state["repeats"], state["pfi_all"], state["sfimp"], state["centered"]) == (10, False, False, False)
    assert search_from_state({**state, "ws": "demo-x3"}) == "?ws=demo-x3"
    changed = {**state, "ws": "demo-x3", "repeats": 40, "pfi_all": True, "sfimp": True, "centered": True}
    search = search_from_state(changed)
    assert sorted(search.lstrip("?").split("&")) == sorted(
        ["ws=demo-x3", "repeats=40", "pfi_all=1", "sfimp=1", "centered=1"]
    )
    assert state_from_search(search) == changed
    assert state_from_search("?ws=demo-x3&centered=yes&repeats=1e3")["centered"] is False
    assert state_from_search("?ws=demo-x3&repeats=1e3")["repeats"] == 10


def test_their_buttons_and_checklist_are_generated_from_the_declarations():
    """The controller's inputs for the buttons (``Field.events``) and the checklist
    (``Field.control``), and the checklist shows the state's value (``Field.show``)."""
    inputs = {dep.component_id for dep in drilldown.CONTROLLER_INPUTS.values()}
    assert {ids.REPEATS_MORE, ids.REPEATS_RESET, ids.PFI_ALL, ids.SFIMP_RUN, ids.CENTERED} <= inputs
    outputs = {(dep.component_id, dep.component_property) for dep in drilldown.CONTROLLER_OUTPUTS.values()}
    assert (ids.CENTERED, "value") in outputs
    assert drilldown._shown(ice.CENTERED, True) == ["c"] and drilldown._shown(ice.CENTERED, False) == []
    state = {**default_state(), "ws": "demo-x3"}
    more = drilldown.REDUCERS[ids.REPEATS_MORE](state, {})
    assert more["repeats"] == 20
    assert drilldown.REDUCERS[ids.REPEATS_RESET](more, {})["repeats"] == 10
    assert drilldown.REDUCERS[ids.PFI_ALL](state, {})["pfi_all"] is True
    assert drilldown.REDUCERS[ids.SFIMP_RUN](state, {})["sfimp"] is True


def test_a_view_reads_its_own_fields_without_listing_them():
    for view in views.REGISTRY:
        assert {f.name for f in view.state} <= view.fields, view.name
    assert "ale_top" not in ale_range.VIEW.reads and "ale_top" in ale_range.VIEW.fields
    assert ale.ALE_K in ale_range.VIEW.reads and "ale_k" in ale_range.VIEW.fields  # another view's, by reference


def test_the_registry_refuses_a_read_of_a_field_no_view_declares():
    """Without the SFIMP view, the PFI view's read of its switch names both; without the ALE
    view, the ALE-range view's read of its K; a typo is refused the same way."""
    base.check_reads(views.REGISTRY)
    without_sfimp = tuple(v for v in views.REGISTRY if v.name != "sfimp")
    with pytest.raises(RuntimeError, match=r"'pfi': \['sfimp'\]"):
        base.check_reads(without_sfimp)
    without_ale = tuple(v for v in views.REGISTRY if v.name != "ale")
    with pytest.raises(RuntimeError, match=r"'ale_range': \['ale_k'\]"):
        base.check_reads(without_ale)
    typo = base.View(
        name="typo", section="overview", order=1, title="t", question="q?", outputs={}, render=lambda ctx, inp: {},
        reads=frozenset({"ws", "ale_kk"}),
    )  # fmt: skip
    with pytest.raises(RuntimeError, match=r"'typo': \['ale_kk'\]"):
        base.check_reads((*views.REGISTRY, typo))


def test_a_view_module_reading_an_unknown_field_fails_at_start(tmp_path):
    """The registry is built when ``dashboard.views`` is imported: an extra view module
    (``WIP_EXTRA_VIEWS``) reading a field no view declares stops the server at start, with
    the view and the field named."""
    (tmp_path / "reads_gone.py").write_text(
        textwrap.dedent(
            """
            from dashboard.views.base import View

            VIEW = View(
                name="reads_gone", section="overview", order=999, title="t", question="q?",
                outputs={}, render=lambda ctx, inp: {}, reads=frozenset({"ws", "gone_field"}),
            )
            """
        )
    )
    env = {"PYTHONPATH": str(tmp_path), "WIP_EXTRA_VIEWS": "reads_gone", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", "import dashboard.views"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "'reads_gone': ['gone_field']" in done.stderr
