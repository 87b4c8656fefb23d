"""Can these importances be trusted? Seed 001's caveats for the PFI bars: leakage and
dependent features, with those features shuffled together (grouped PFI).

Dependence (``compute.feature_dependence``) is read from the data alone, on the rows PFI
uses, in the web process (no model code; memoised per process). Grouped PFI needs the model:
it is this view's task, run in the isolated job on the same rows with the same number of
permutations as the bars, for the groups ``Dependence.groups`` makes of the flagged features.
The leakage check reads the cached PFI and the target.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
from dash import html

import compute
from compute import findings
from compute.importance import permutation_block
from compute.losses import LOSS_LABELS

from .. import components, figures, labels, planning, samples, tasks
from .base import PFI, Lru, View, empty
from .engine_note import engine_note, joined

KIND = "pfi_groups"
CS_KIND = "cs_pfi"  # importance once the other features are known (cs-PFI) beside the bars
THRESHOLD = 0.7  # dependence (|rank correlation|, correlation ratio or Cramér's V) called strong
GRAPH = "caveats-group-graph"
LEAK = "caveats-leak"
TABLE = "caveats-dependence-table"
INFO = "caveats-info"
CS_GRAPH = "caveats-conditional-graph"
CS_INFO = "caveats-conditional-info"
_DEPENDENCE = Lru(8)
_FLAGGED = Lru(8)
# numbers and sentences read off results, per process: a result never changes under its cache
# key (a content hash), and the rows are named by the data's checksum, the subgroup and the
# exclusions, so an entry is never stale
_DERIVED = Lru(32)


def _derived(tag: tuple, compute):
    """``compute()``, kept under ``tag`` (which names every input); a None is kept too."""
    return _DERIVED.get(tag, lambda: (compute(),))[0]


def _rows_tag(inp) -> str:
    """The rows a drill-down looks at, by name: the data set, the subgroup, the exclusions."""
    return json.dumps(
        [inp.ws.id, inp.ws.data_sha, inp.state["subgroup"], list(map(str, inp.state.get("exclude") or ()))]
    )


def pfi_rows(inp) -> np.ndarray:
    """The rows the PFI bars use: the subgroup minus the excluded observations."""
    return planning.select_rows(inp.data, inp.state["subgroup"], inp.state.get("exclude")).to_numpy()


def _dependence_key(inp) -> str:
    return json.dumps([inp.ws.id, inp.ws.data_sha, planning.rows_id(inp.state["subgroup"], inp.state.get("exclude"))])


def dependence(inp) -> compute.Dependence:
    """Dependence of the model's inputs on the PFI rows (memoised per data set and rows)."""
    return _DEPENDENCE.get(
        _dependence_key(inp), lambda: compute.feature_dependence(inp.data.loc[pfi_rows(inp), list(inp.ws.features)])
    )


def flagged(inp) -> dict:
    """:meth:`compute.Dependence.flagged` at THRESHOLD of :func:`dependence` (memoised alike)."""
    return _FLAGGED.get(_dependence_key(inp), lambda: dependence(inp).flagged(THRESHOLD))


def partners_line(inp) -> str:
    """One line for beside the PFI bars: the chosen feature's strongly dependent partners."""
    if len(inp.ws.features) < 2:
        return ""
    dep = dependence(inp)
    partners = dep.partners(inp.feature, THRESHOLD) if inp.feature in dep.strength.index else pd.Series(dtype=float)
    if partners.empty:
        others = flagged(inp)
        if not others:
            return ""
        return (
            f"Strongly dependent features: {', '.join(map(inp.label, others))}. Shuffling one of them alone creates "
            "rows unlike the data, and dependent features share their importance (see 'Can these importances be "
            "trusted?')."
        )
    named = ", ".join(f"{inp.label(p)} ({dep.measure.loc[inp.feature, p]} {v:.2f})" for p, v in partners.items())
    chosen = inp.label(inp.feature)
    return (
        f"{chosen} depends strongly on {named}: shuffling {chosen} alone creates rows unlike the data, "
        "and the features share their importance, so each bar can mislead; 'Can these importances be trusted?' "
        "shows them shuffled together."
    )


def _pfi_rows(state: dict, ws) -> int | None:
    """The focus model's PFI sample (the bars' rows: same budget, same seed)."""
    focus = ws.model(str(state.get("model") or ""))
    return planning.pfi_sample(len(focus.features), bool(state.get("pfi_all")), walked=focus.walked)


def params(state: dict, ws) -> dict | None:
    """The task's parameters (the planner adds the PFI rows: ``TaskSpec(rows=True)``)."""
    if len(ws.features) < 2:
        return None
    return {
        "n_repeats": int(state["repeats"]),
        "threshold": THRESHOLD,
        "n_obs": _pfi_rows(state, ws),  # the same rows as the focus model's PFI bars
    }


def cost(ws, task, data) -> list[int]:
    """Model rows: the PFI rows, once per repetition and group (at most p / 2 groups), and
    once as they are."""
    rows = min(len(data), task.params.get("n_obs") or len(data))
    return [rows * max(1, len(ws.model(task.model).features) // 2) * int(task.params["n_repeats"]) + rows]


def run(model, X, y, ws, params, n_jobs, *, inside=None):
    """The task (in the isolated job, on the PFI rows): the flagged groups, shuffled jointly.
    ``inside`` (the bars come from the all-rows permutations): X is every row and ``inside``
    the selected ones; the groups are found on those, shuffled on every row and restricted,
    so the group and its members' bars share their rows and pairs."""
    chosen = X if inside is None else X[inside]
    groups = compute.feature_dependence(chosen, list(ws.features)).groups(params["threshold"])
    if not groups:
        return {"groups": {}, "pfi": None}
    result = permutation_block(
        model,
        X,
        y,
        loss=ws.loss,
        output=ws.output,
        groups=groups,
        n_repeats=params["n_repeats"],
        n_obs=params.get("n_obs"),  # the same rows as the PFI bars (same seed, same budget)
        random_state=planning.SEED,
        n_jobs=n_jobs,
        keep_pairs=inside is not None,
    )
    if inside is not None:
        positions = compute.permutation_rows(len(X), params.get("n_obs"), planning.SEED)  # labels may repeat
        result = result.restrict(inside[positions], n_total=int(inside.sum()))
    return {"groups": groups, "pfi": result}


TASK = planning.TaskSpec(
    KIND, params, run, models="focus", label="dependent features shuffled together", rows=True, cost=cost
)


def cs_params(state: dict, ws) -> dict | None:
    """Importance once the other features are known (cs-PFI) on the bars' rows, with the bars'
    repetitions and row budget (the planner adds the rows: ``TaskSpec(rows=True)``)."""
    if len(ws.features) < 2:
        return None
    return {
        "n_repeats": int(state["repeats"]),
        "n_obs": _pfi_rows(state, ws),  # the same rows as the focus model's PFI bars
        "max_depth": 4,
    }


def cs_cost(ws, task, data) -> list[int]:
    """Model rows: the PFI rows, once per repetition and feature (a part's features), and once
    as they are; a split job's join: none."""
    if task.params.get("parts"):
        return [1]
    n = len(data) or int(ws.n_rows)  # a part reading its sample has no data set
    rows = min(n, task.params.get("n_obs") or n)
    features = task.params.get("features") or ws.model(task.model).features
    return [rows * len(features) * int(task.params["n_repeats"]) + rows]


CS_BLOCK = 10  # features per cs-PFI part when a job is split over workers (a tree and the permutations of each)


def cs_split(ws, task: planning.Task) -> planning.Split | None:
    """With workers: one part per block of CS_BLOCK features (``cs_pfi_part``), each on the
    same rows with the random streams its features have in the whole call, reading them from
    their sample (PFI's: :mod:`dashboard.samples`, kept by the job first); the task then
    joins them (``ConditionalImportance.concat``): the one call's numbers."""
    if task.params.get("parts") or len(ws.model(task.model).features) <= CS_BLOCK:
        return None
    return samples.feature_blocks(CS_TASK, CS_PART_KIND, ws, task, CS_BLOCK)


def cs_execute(job, task: planning.Task, model) -> None:
    """The whole call on the bars' rows, or the join of a split job's parts."""
    keys = task.params.get("parts")
    if not keys:
        tasks.execute_declared(CS_TASK, job, task, model)
        return
    job.say(f"{task.model}: {CS_TASK.label} (joining {len(keys)} parts)", 0)
    found = [job.store.get(key) for key in keys]
    if any(part is None for part in found):
        raise compute.ModelError("A part of the importance once the others are known was lost; run it again.")
    joined = compute.ConditionalImportance.concat(found)
    # the rows the sample was drawn from (a part on its sample saw those alone)
    n_total = int(planning.select_rows(job.data, task.params["condition"], task.params["excluded"]).sum())
    job.store.put(task.key, replace(joined, conditional=replace(joined.conditional, n_total=n_total)))


def cs_part_execute(job, task: planning.Task, model) -> None:
    """A block of features on the bars' rows: on their sample alone when the task has one."""
    sample = samples.read(job, task)
    if sample is None:
        tasks.execute_declared(CS_PART, job, task, model)
        return
    job.say(f"{task.model}: {CS_TASK.label}", 0)
    tasks.need_rows(np.ones(len(sample), dtype=bool), 2)
    X, y = sample[list(job.ws.model(task.model).features)], sample[job.ws.target]
    job.store.put(task.key, cs_run(model, X, y, job.ws, task.params, job.n_jobs))


def cs_run(model, X, y, ws, params, n_jobs, *, inside=None):
    """The task (in the isolated job): each feature shuffled within the subgroups of a tree
    learning it from the others (``compute.conditional_importance``); the marginal PFI is
    the bars'. ``inside`` (the bars come from the all-rows permutations): on the selected
    rows, with the same budget."""
    chosen, target = (X, y) if inside is None else (X[inside], y[inside])
    return compute.conditional_importance(
        model,
        chosen,
        target,
        loss=ws.loss,
        output=ws.output,
        n_repeats=params["n_repeats"],
        n_obs=params.get("n_obs"),
        max_depth=params["max_depth"],
        marginal=False,
        random_state=planning.SEED,
        n_jobs=n_jobs,
        features=params.get("features"),  # a split job's block of features, with their streams
        streams=params.get("streams"),
    )


CS_PART_KIND = "cs_pfi_part"
CS_TASK = planning.TaskSpec(
    CS_KIND,
    cs_params,
    cs_run,
    models="focus",
    label="each feature shuffled within similar rows (importance once the others are known)",
    rows=True,
    cost=cs_cost,
    split=cs_split,
    execute=cs_execute,
    version=2,  # the conditional streams are each feature's own (spawn_key (k, 1)): split jobs join to one call
)
CS_PART = planning.TaskSpec(
    CS_PART_KIND,
    run=cs_run,
    label=CS_TASK.label,
    rows=True,
    cost=cs_cost,
    execute=cs_part_execute,
    reads_rows=True,  # its sample (the data set when it permutes every selected row)
)


def conditional_rows(cs: compute.ConditionalImportance, pfi: compute.PermutationImportance) -> pd.DataFrame:
    """Per feature: the bars' (marginal) PFI with the bars' own "±" (its standard error over
    the rows and permutations, :attr:`compute.PermutationImportance.uncertainty`: the copy
    draws what the bars draw), the importance once the others are known (cs-PFI) and its
    standard error."""
    return pd.DataFrame(
        {
            "marginal": pfi.importance,
            "marginal_std_error": pfi.uncertainty,
            "conditional": cs.importance,
            "conditional_std_error": cs.std_error,
        }
    ).dropna(subset=["conditional"])


def conditional_reading(cs: compute.ConditionalImportance, pfi: compute.PermutationImportance, feature) -> str:
    """One line on the feature whose importance drops most once the others are known (the
    chosen feature when its drop is as large; ``compute.findings.inflated_by_dependence``),
    or on none dropping."""
    found = findings.inflated_by_dependence(cs, pfi, min_drop=0.0, prefer=feature)
    if found is None:
        return (
            "Shuffled within similar rows (importance once the other features are known), no feature loses "
            "importance beyond the permutations' noise: the bars do not lean on rows that never occur."
        )
    name, share, known = found.numbers["feature"], found.numbers["share"], found.numbers["known"]
    how = "most" if share >= 0.5 else "part"
    return (
        f"{name}: {figures.shown_number(found.numbers['marginal'], 3)} → "
        f"{figures.shown_number(found.numbers['conditional'], 3)} once {known} "
        f"{'is' if ',' not in known else 'are'} known: {how} of its importance ({share:.0%}) came from "
        "shuffled rows that never occur. " + cs.describe(name) + "."
    )


SKILL = {
    "squared_error": "R²",
    "log_loss": "log-loss skill (McFadden's R²)",
}


def leak_check(inp, pfi: compute.PermutationImportance, key: str | None = None) -> compute.LeakageCheck | None:
    """The leak check on the rows PFI used (None where it does not apply). ``key``: the PFI
    result's cache key, under which the check is kept (per process)."""
    if key is None:
        return _leak_check(inp, pfi)
    ws = inp.ws
    return _derived(("leak", key, ws.target, ws.task, _rows_tag(inp)), lambda: _leak_check(inp, pfi))


def _leak_check(inp, pfi: compute.PermutationImportance) -> compute.LeakageCheck | None:
    if pfi.kind != "difference" or pfi.loss not in LOSS_LABELS:
        return None
    target = inp.data[inp.ws.target]
    # the rows PFI used (its sample, on large data): the model's error there
    y = (target.loc[pfi.rows] if pfi.rows is not None else target[pfi_rows(inp)]).to_numpy()
    n_classes = int(target.nunique()) if inp.ws.task == "classification" else None
    try:
        return compute.leakage_check(pfi, y, n_classes=n_classes)
    except compute.InputError:
        return None


def leak_text(inp, pfi: compute.PermutationImportance, key: str | None = None) -> str:
    check = leak_check(inp, pfi, key)
    if check is None:
        return ""
    name = SKILL.get(pfi.loss, f"skill against a constant prediction ({LOSS_LABELS[pfi.loss]})")
    carriers = " and ".join(f"'{inp.label(c)}'" for c in check.carriers)
    if check.flagged:
        return (
            f"Worth a look: the model is near-perfect ({name} {check.skill:.3f}; 1 is perfect) and {carriers} "
            f"carr{'ies' if len(check.carriers) == 1 else 'y'} {check.carried:.0%} of its importance. Could "
            f"{'it' if len(check.carriers) == 1 else 'they'} be known only with or after the outcome (as two counts "
            "that add up to the target)? Then the model learnt from a leak and will not do as well in use."
        )
    spread = len(check.carriers)
    return (
        f"No sign of a leak: {name} {check.skill:.3f} (1 is perfect), and {spread} feature"
        f"{'s carry' if spread != 1 else ' carries'} {check.carried:.0%} of the importance."
        if np.isfinite(check.skill)
        else ""
    )


def pair_rows(inp, dep, found: dict | None = None) -> list[dict]:
    """The table's rows: each flagged pair once, the selected feature's pairs first, then by
    strength (``compute.FeatureDependence``). ``found``: ``dep.flagged(THRESHOLD)`` when
    already known."""
    rows: list[dict] = []
    for feature, partners in (dep.flagged(THRESHOLD) if found is None else found).items():
        for partner in partners:
            if (partner, feature) in {(r["feature"], r["depends on"]) for r in rows}:
                continue
            rows.append(
                {
                    "feature": str(feature),
                    "depends on": str(partner),
                    "strength": float(dep.strength.loc[feature, partner]),
                    "measure": str(dep.measure.loc[feature, partner]),
                }
            )
    rows.sort(key=lambda r: (inp.feature not in (r["feature"], r["depends on"]), -float(r["strength"])))
    return rows


def conditional_outputs(inp, pfi: compute.PermutationImportance) -> dict:
    """The figure of the importance once the others are known, and its one-line reading."""
    if len(inp.ws.features) < 2:
        return {"cs_figure": empty("One feature: nothing to condition on."), "cs_info": ""}
    cs = inp.results(CS_KIND).get(inp.state["model"])
    if cs is None:
        return {"cs_figure": empty("Shuffling each feature within similar rows…"), "cs_info": ""}
    model = inp.state["model"]
    keys = (inp.keys.get(CS_KIND, {}).get(model), inp.keys.get("pfi", {}).get(model))
    if None in keys:
        frame, reading = conditional_rows(cs, pfi), conditional_reading(cs, pfi, inp.feature)
    else:  # both read off the two results alone: kept under their keys
        frame = _derived(("cs rows", *keys), lambda: conditional_rows(cs, pfi)).copy()
        reading = _derived(("cs reading", *keys, inp.feature), lambda: conditional_reading(cs, pfi, inp.feature))
    loss = LOSS_LABELS.get(pfi.loss, pfi.loss)
    figure = figures.conditional_pfi_figure(
        frame,
        loss=loss,
        selected=inp.feature,
        subtitle=f"{inp.state['model']}; mean over {cs.conditional.n_repeats} permutations ± standard error; "
        f"{inp.selection}",
        names=inp.names,
    )
    reading = labels.relabel_text(inp.ws, reading)  # its features' labels
    return {"cs_figure": figure, "cs_info": joined(reading, engine_note(cs))}


def render(ctx, inp) -> dict:
    model = inp.state["model"]
    pfi = inp.pfi.get(model)
    if pfi is None:
        return {**_empty("Waiting for the permutations…")}
    conditional = conditional_outputs(inp, pfi)
    leak = leak_text(inp, pfi, inp.keys.get("pfi", {}).get(model))
    dep = dependence(inp)
    found_pairs = flagged(inp)
    rows = pair_rows(inp, dep, found_pairs)
    shown = [{**r, "feature": inp.label(r["feature"]), "depends on": inp.label(r["depends on"])} for r in rows]
    table = pd.DataFrame(shown, columns=["feature", "depends on", "strength", "measure"])
    data, columns = figures.table_data(table.set_index("feature"), index_name="feature") if rows else ([], [])
    found = inp.results(KIND).get(model)
    loss = LOSS_LABELS.get(pfi.loss, pfi.loss)
    if not found_pairs:
        figure = empty("No two features depend strongly on each other: each bar stands for itself.")
        info = (
            f"Dependence is read on {dep.n_rows:,} rows; none reaches {THRESHOLD} on a 0-1 scale (rank correlation, "
            "correlation ratio or Cramér's V)."
        )
    elif found is None:
        figure, info = empty("Shuffling the dependent features together…"), ""
    else:
        frame = group_rows(found, pfi)
        if inp.names:  # the groups and their parts as people read them
            frame.index = [labels.relabel_text(inp.ws, str(g)) for g in frame.index]
            frame["alone_text"] = [labels.relabel_text(inp.ws, t) for t in frame["alone_text"]]
        figure = figures.group_pfi_figure(
            frame,
            loss=loss,
            title="Dependent features: shuffled together, or one at a time and summed",
            subtitle=f"{model}; mean over {found['pfi'].n_repeats} permutations; {inp.selection}",
        )
        info = takeaway(frame)
    return {"leak": leak, "figure": figure, "data": data, "columns": columns, "info": info, **conditional}


def group_rows(found: dict, pfi: compute.PermutationImportance) -> pd.DataFrame:
    """Per group: PFI shuffled together, the sum of the members' bars and their gap
    (``compute.grouped_against_alone``), and the parts as text."""
    frame = compute.grouped_against_alone(found["pfi"], pfi, found["groups"])
    frame["alone_text"] = [
        ", ".join(f"{m} alone {v:.4g}" for m, v in pfi.importance.reindex(members).items())
        for members in found["groups"].values()
    ]
    return frame


def takeaway(frame: pd.DataFrame) -> str:
    """One line on the group whose joint PFI differs most from its parts."""
    name = frame["gap"].abs().idxmax()
    row = frame.loc[name]
    if row["together"] >= row["alone_sum"]:
        return (
            f"Shuffled together, {name} raise the error by {row['together']:.4g}, more than the "
            f"{row['alone_sum']:.4g} of their bars added up: the model can use one in place of the other, so each "
            "bar alone understates what they carry together."
        )
    return (
        f"Shuffled together, {name} raise the error by {row['together']:.4g}, less than the "
        f"{row['alone_sum']:.4g} of their bars added up: shuffling one alone created rows unlike the data "
        "(extrapolation), which inflated its bar."
    )


def _empty(message: str) -> dict:
    return {
        "leak": "",
        "figure": empty(message),
        "data": [],
        "columns": [],
        "info": "",
        "cs_figure": empty(message),
        "cs_info": "",
    }


def library(inp) -> dict:
    """The flagged pairs' dependence (``compute.feature_dependence``) and each group's PFI
    shuffled together against its members' bars summed (``compute.grouped_against_alone``)."""
    pfi = inp.pfi.get(inp.state["model"])
    if pfi is None:
        return {}
    found: dict = {
        f"strength {r['feature']} ~ {r['depends on']}": r["strength"] for r in pair_rows(inp, dependence(inp))
    }
    cs = inp.results(CS_KIND).get(inp.state["model"])
    if cs is not None and len(inp.ws.features) >= 2:
        found["conditional"] = conditional_rows(cs, pfi)["conditional"]
    groups = inp.results(KIND).get(inp.state["model"])
    if groups is not None and groups["groups"]:
        frame = compute.grouped_against_alone(groups["pfi"], pfi, groups["groups"])
        found["together"], found["alone, summed"] = frame["together"], frame["alone_sum"]
    return found


VIEW = View(
    name="pfi_caveats",
    section="overview",
    order=14,
    title="Can these importances be trusted?",
    question=(
        "Is a feature too good to be true, do dependent features share or inflate their bars, and what is each "
        "worth once the others are known?"
    ),
    method=(
        "Turp, Permutation Feature Importance: Deep Dive (Modulos blog), caveats 3 and the bike-sharing example: "
        "strongly "
        "dependent features (|Spearman rank correlation|, correlation ratio or Cramér's V >= 0.7) share importance "
        "and a feature permuted alone is evaluated on rows unlike the data (Molnar et al. 2022, 'General pitfalls "
        "of model-agnostic interpretation methods', on feature dependence); grouped PFI is the PFI of "
        "Casalicchio et al. (2018), Eq. 8, with the group's columns permuted jointly (as dalex's variable_groups). "
        "A near-perfect model (skill >= 0.95 against a constant prediction) whose "
        "importance sits on one or two features is flagged for a leakage check. Importance once the other features "
        "are known: Molnar, König, "
        "Bischl & Casalicchio (2023), 'Model-agnostic feature importance and effects with dependent features: a "
        "conditional subgroup approach' (cs-PFI): each feature is shuffled within the leaves of a tree (depth 4, "
        "30 rows per leaf, splits significant at 5 %) that learns it from the other features, so the shuffled rows "
        "stay like the data; the result is what the feature adds once the others are known."
    ),
    outputs={
        "leak": (LEAK, "children"),
        "figure": (GRAPH, "figure"),
        "data": (TABLE, "data"),
        "columns": (TABLE, "columns"),
        "info": (INFO, "children"),
        "cs_figure": (CS_GRAPH, "figure"),
        "cs_info": (CS_INFO, "children"),
    },
    placeholder=_empty,
    render=render,
    body=lambda: [
        html.P(id=LEAK, className="help leak"),
        components.table(TABLE, page_size=8),
        components.graph(GRAPH, height=None, filename="grouped-pfi"),
        html.Div(id=INFO, className="help"),
        components.graph(CS_GRAPH, height=None, filename="conditional-pfi"),
        html.Div(id=CS_INFO, className="help"),
    ],
    needs=frozenset({PFI}),
    tasks=(TASK, CS_TASK),
    parts=(CS_PART,),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "repeats", "pfi_all"}),
    library=library,
)
