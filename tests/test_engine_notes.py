"""Issue 42: a view's notes say which engine computed its numbers ("exact tree walk" or
"batched predict") and, when the walk was not used under auto, why; a result cached by an
older version (no engine recorded) says nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dashboard import jobs, planning, views
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views.engine_note import engine_note, engine_of

WALK_SENTENCE = (
    "Computed exactly from the model's own trees (exact tree walk: the same numbers as its predictions, faster)."
)
PREDICT_SENTENCE = "Computed by predicting every changed row (batched predict)."
SVC = "SVC is not a tree model the engine reads"


def _pfi(engine=None, reason=None):
    """A result as PermutationImportance / InteractionStrength record their engine."""
    return SimpleNamespace(engine=engine, engine_reason=reason)


def _profile(engine=None, reason=None):
    """A result as FeatureProfile records it (in ``params``)."""
    params = {"grid": 20} if engine is None else {"grid": 20, "engine": engine, "engine_reason": reason}
    return SimpleNamespace(params=params)


def test_the_walk_is_said_once_in_plain_words():
    assert engine_note(_pfi("exact tree walk")) == WALK_SENTENCE
    assert engine_note(_profile("exact tree walk")) == WALK_SENTENCE
    both = engine_note({"a": _pfi("exact tree walk"), "b": _pfi("exact tree walk")})
    assert both == (
        "Computed exactly from the models' own trees (exact tree walk: the same numbers as their predictions, faster)."
    )
    assert engine_note(_profile("exact tree walk"), short=True) == "computed by exact tree walk"


def test_the_batched_predict_gives_its_reason():
    assert engine_note(_pfi("batched predict", SVC)) == f"{PREDICT_SENTENCE} The exact tree walk was not used: {SVC}."
    assert engine_note(_profile("batched predict", SVC + ".")).endswith(f"not used: {SVC}.")  # one full stop
    assert engine_note(_profile("batched predict", SVC), short=True) == f"computed by batched predict ({SVC})"


def test_a_predict_asked_for_gives_no_reason():
    asked = "engine='predict' was asked for"
    assert engine_note(_pfi("batched predict", asked)) == PREDICT_SENTENCE
    assert engine_note(_profile("batched predict", asked), short=True) == "computed by batched predict"
    assert engine_note(_pfi("batched predict")) == PREDICT_SENTENCE


def test_models_are_named_when_their_engines_differ():
    note = engine_note({"boost": _pfi("exact tree walk"), "svc": _pfi("batched predict", SVC)})
    assert note == f"How each model was computed: boost: exact tree walk; svc: batched predict ({SVC})."
    short = engine_note({"boost": _pfi("exact tree walk"), "svc": _pfi("batched predict", SVC)}, short=True)
    assert short == f"computed by boost: exact tree walk; svc: batched predict ({SVC})"
    # the same engine for different reasons is not one story either
    other = engine_note({"a": _pfi("batched predict", "reason one"), "b": _pfi("batched predict", "reason two")})
    assert other == "How each model was computed: a: batched predict (reason one); b: batched predict (reason two)."


def test_results_without_an_engine_say_nothing():
    assert engine_note(_pfi()) == ""
    assert engine_note(_profile()) == ""
    assert engine_note(SimpleNamespace()) == ""  # cached by a version before the engine: no attribute at all
    assert engine_note(SimpleNamespace(params={})) == ""
    assert engine_note(None) == "" and engine_note({}) == ""
    assert engine_note({"a": SimpleNamespace(), "b": _profile()}) == ""
    assert engine_of(_pfi("something else")) is None
    # one model recording its engine and one not: only the one that does is named
    assert engine_note({"a": _pfi("exact tree walk"), "b": SimpleNamespace()}) == (
        "How each model was computed: a: exact tree walk."
    )


def test_a_conditional_importance_reads_its_conditional_pfi():
    cs = SimpleNamespace(conditional=_pfi("exact tree walk"), marginal=None)
    assert engine_note(cs) == WALK_SENTENCE
    assert engine_note(SimpleNamespace(conditional=SimpleNamespace())) == ""


# --- the views, on results the jobs compute ----------------------------------------------------


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("engine-notes-cache")), max_curves=300))._wip_context


def _results(ctx, ws_id: str, kinds: set, **changes) -> dict:
    """A results record with the planned tasks of ``kinds`` computed."""
    state = normalize(ctx, {**default_state(), "ws": ws_id, **changes})[0]
    ws = ctx.store.workspace(ws_id)
    planned = views.plan_state(ctx, ws, state)
    wanted = [t for t in planning.missing(ctx.store, planned["tasks"]) if t["kind"] in kinds]
    jobs.run(ctx.store, ws, wanted, policy=ctx.policy)
    return {"state": state, "keys": planned["keys"]}


def test_the_pfi_info_names_the_engine_of_each_model(ctx):
    """demo-cancer: the gradient boosting model is walked, the logistic regression (a
    pipeline of a scaler and a linear model) is predicted, with the reason."""
    results = _results(ctx, "demo-cancer", {"pfi"})
    inp = views.load_inputs(ctx, results)
    assert set(inp.pfi) == {"gradient boosting", "logistic regression"}
    boost, logit = inp.pfi["gradient boosting"], inp.pfi["logistic regression"]
    assert (boost.engine, boost.engine_reason) == ("exact tree walk", None)
    assert logit.engine == "batched predict" and logit.engine_reason
    info = views.render(ctx, "pfi", results)["info"]
    reason = logit.engine_reason.rstrip(".")
    assert (
        f"How each model was computed: gradient boosting: exact tree walk; "
        f"logistic regression: batched predict ({reason})." in info
    )


def test_the_feature_views_name_the_engine_of_the_curves(ctx):
    """demo-x3 (a random forest): the ICE/ICI pass is walked; the ICI info, and the ICE and
    PI subtitles, say so."""
    results = _results(ctx, "demo-x3", {"profiles", "pfi"}, feature="X1")
    inp = views.load_inputs(ctx, results)
    assert inp.profile.params["engine"] == "exact tree walk"
    assert views.render(ctx, "ici", results)["info"].endswith(WALK_SENTENCE)
    for name in ("ice", "pi"):
        figure = views.render(ctx, name, results)["figure"]
        assert "computed by exact tree walk" in figure.layout.title.subtitle.text
    pfi = inp.pfi["random forest"]
    if pfi.engine == "exact tree walk":  # the compiled walk (without numba a forest's PFI is predicted)
        assert WALK_SENTENCE in views.render(ctx, "pfi", results)["info"]
    else:
        assert (
            f"The exact tree walk was not used: {pfi.engine_reason.rstrip('.')}."
            in (views.render(ctx, "pfi", results)["info"])
        )


def test_a_model_the_walk_cannot_read_says_batched_predict(ctx):
    """demo-diabetes with its ridge pipeline in focus: the curves are predicted, and the ICI
    info says why the walk was not used."""
    results = _results(ctx, "demo-diabetes", {"profiles"}, model="ridge", feature="bmi")
    inp = views.load_inputs(ctx, results)
    prof = inp.profile
    assert prof.params["engine"] == "batched predict" and prof.params["engine_reason"]
    info = views.render(ctx, "ici", results)["info"]
    assert f"{PREDICT_SENTENCE} The exact tree walk was not used: {prof.params['engine_reason'].rstrip('.')}." in info
