"""What the views need, as cacheable tasks; the model work that fills the cache.

A view never calls a model. :func:`plan` lists the results a drill-down state needs, with
their cache keys; :func:`missing` says which are not cached yet; :func:`run` computes
those inside a background job (a forked child of the server worker, so a model that
crashes its process fails the job, not the worker).

Per (workspace, model) one pass per feature (``compute.feature_profile``) yields the ICE
tensor; from the profiles we keep each feature's profile and a *summary*: the local PFI
of every explained row and feature (the ICI integrals, Eq. 9), each row's ICE extremes
(for CIU), ICE feature impact and PD importance. Conditional PFI of any subgroup, global
CI and an observation's CIU are then aggregations of the summary: switching feature,
subgroup or observation needs no new prediction. Permutation PFI with repetitions
(Eq. 8, on the subgroup's rows) and SFIMP are separate tasks.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

import compute
from compute.ciu import ciu_table

from .store import ModelEntry, Store, Workspace, result_key

SEED = 0
QUANTILE_GRID = 60


@dataclass(frozen=True)
class Task:
    kind: str            # "profiles", "pfi" or "sfimp"
    key: str             # cache key of the result the task writes (profiles: the summary)
    model: str           # model name within the workspace
    params: dict
    also: tuple = ()     # further keys the task writes (profiles: one per feature)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "key": self.key, "model": self.model, "params": self.params,
                "also": list(self.also)}

    @classmethod
    def from_dict(cls, record: dict) -> Task:
        return cls(record["kind"], record["key"], record["model"], record["params"], tuple(record.get("also", ())))


# --- keys --------------------------------------------------------------------------------
def profile_settings(n_rows: int, max_curves: int, grid_budget: int) -> dict:
    n_obs = min(int(n_rows), int(max_curves))
    return {"n_obs": n_obs if n_obs < n_rows else None, "budget": int(grid_budget), "seed": SEED}


def summary_key(ws: Workspace, model: ModelEntry, settings: dict) -> str:
    return result_key("summary", ws, model, **settings)


def profile_key(ws: Workspace, model: ModelEntry, feature: str, settings: dict) -> str:
    return result_key("profile", ws, model, feature=str(feature), **settings)


def rows_id(condition: str, excluded) -> str:
    """Identifies a selection of rows: a subgroup condition minus excluded observations."""
    spec = json.dumps([(condition or "").strip(), sorted(str(e) for e in (excluded or ()))])
    return hashlib.sha256(spec.encode()).hexdigest()[:24]


def pfi_key(ws, model, rows: str, n_repeats: int) -> str:
    return result_key("pfi", ws, model, rows=rows, n_repeats=int(n_repeats), seed=SEED)


def sfimp_key(ws, model, rows: str) -> str:
    return result_key("sfimp", ws, model, rows=rows, seed=SEED)


def plan(ws: Workspace, *, focus: str, n_rows: int, condition: str, excluded, n_repeats: int,
         sfimp: bool, max_curves: int, grid_budget: int) -> dict:
    """The cache keys a drill-down state needs, and the tasks that produce them."""
    settings = profile_settings(n_rows, max_curves, grid_budget)
    focus_entry = ws.model(focus)
    rows = rows_id(condition, excluded)
    keys = {
        "summary": summary_key(ws, focus_entry, settings),
        "profiles": {f: profile_key(ws, focus_entry, f, settings) for f in focus_entry.features},
        "pfi": {m.name: pfi_key(ws, m, rows, n_repeats) for m in ws.models},
        "sfimp": {m.name: sfimp_key(ws, m, rows) for m in ws.models} if sfimp else {},
    }
    tasks = [Task("profiles", keys["summary"], focus_entry.name, settings, tuple(keys["profiles"].values()))]
    tasks += [Task("pfi", keys["pfi"][m.name], m.name,
                   {"condition": condition, "excluded": list(excluded or ()), "n_repeats": int(n_repeats)})
              for m in ws.models]
    tasks += [Task("sfimp", keys["sfimp"][m.name], m.name, {"condition": condition, "excluded": list(excluded or ())})
              for m in ws.models if sfimp]
    return {"keys": keys, "tasks": [t.to_dict() for t in tasks]}


def missing(store: Store, tasks: list[dict]) -> list[dict]:
    """The tasks with a result not in the cache (evicted or dropped as damaged included)."""
    return [t for t in tasks if not all(store.has(k) for k in (t["key"], *t.get("also", ())))]


# --- rows --------------------------------------------------------------------------------
def select_rows(data: pd.DataFrame, condition: str, excluded=()) -> pd.Series:
    """Boolean mask over the data: the subgroup condition (all rows if empty) minus the
    excluded row labels. Raises ``SubgroupError`` for a bad condition."""
    mask = compute.parse_subgroup(condition, data) if (condition or "").strip() else pd.Series(True, index=data.index)
    if excluded:
        labels = pd.Index([_label(e, data.index) for e in excluded])
        mask = mask & ~data.index.isin(labels)
    return mask


def _label(value, index: pd.Index):
    """A row label as it arrives from the URL or a click (a string or int) in the index's type."""
    if pd.api.types.is_integer_dtype(index.dtype):
        try:
            return int(value)
        except (TypeError, ValueError):
            return value
    return value


# --- running -----------------------------------------------------------------------------
Progress = Callable[[int, int, str], None]


def run(store: Store, ws: Workspace, tasks: list[dict], *, policy, n_jobs: int = 1,
        progress: Progress | None = None) -> None:
    """Compute the missing tasks and cache their results (inside a background job)."""
    progress = progress or (lambda done, total, label: None)
    todo = [Task.from_dict(t) for t in missing(store, tasks)]
    data = store.data(ws)
    y = data[ws.target]
    models = {}
    steps = sum(len(ws.model(t.model).features) if t.kind == "profiles" else 1 for t in todo)
    done = 0
    for task in todo:
        with task_lock(store, task.key):  # another session may be computing the same task
            if not missing(store, [task.to_dict()]):
                done += len(ws.model(task.model).features) if task.kind == "profiles" else 1
                continue
            done = _run_task(store, ws, task, data, y, models, policy, n_jobs, progress, done, steps)
    progress(steps, steps, "done")


@contextmanager
def task_lock(store: Store, key: str):
    """An exclusive lock per task across processes and machines sharing the cache folder
    (``flock``: released by the kernel if the holder dies, so a killed job blocks no one)."""
    folder = store.root / "locks"
    folder.mkdir(exist_ok=True)
    path = folder / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".lock")
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_task(store, ws, task, data, y, models, policy, n_jobs, progress, done, steps) -> int:
    """Compute one task into the cache; returns the progress count after it."""
    from .loaders import load_model

    entry = ws.model(task.model)
    if entry.name not in models:
        progress(done, steps, f"loading model {entry.name}")
        path = store.path(entry.path)
        # the file passed the upload limit when it arrived (demo models are ours)
        file_policy = replace(policy, max_bytes=max(policy.max_bytes, path.stat().st_size))
        models[entry.name] = load_model(path, name=entry.name, policy=file_policy,
                                        accepted_types=entry.accepted_types)
    model = models[entry.name]
    X = data[list(entry.features)]
    if task.kind == "profiles":
        def step(feature, i):
            progress(done + i, steps, f"{entry.name}: ICE/ICI pass for {feature}")
        store.put(task.key, _profiles(store, ws, entry, model, X, y, task.params, n_jobs, step))
        return done + len(entry.features)
    mask = select_rows(data, task.params["condition"], task.params["excluded"]).to_numpy()
    _need_rows(mask, 2)
    if task.kind == "pfi":
        progress(done, steps, f"{entry.name}: permutation importance ({task.params['n_repeats']} repeats)")
        result = compute.permutation_importance(
            model, X[mask], y[mask], loss=ws.loss, n_repeats=task.params["n_repeats"],
            output=ws.output, random_state=SEED, n_jobs=n_jobs)
        result.attrs["n_rows"] = int(mask.sum())
    else:
        progress(done, steps, f"{entry.name}: Shapley feature importance")
        result = compute.shapley_importance(
            model, X[mask], y[mask], loss=ws.loss, output=ws.output, random_state=SEED,
            n_jobs=n_jobs, exact_max_players=10, tol=0.02, max_rows=4_000_000)
    store.put(task.key, result)
    return done + 1


def _need_rows(mask: np.ndarray, least: int) -> None:
    if int(mask.sum()) < least:
        raise compute.InputError(
            f"The selected rows number {int(mask.sum())}; at least {least} are needed to permute a feature. "
            "Choose a larger subgroup or exclude fewer observations.")


def _profiles(store, ws, entry, model, X, y, settings, n_jobs, step) -> dict:
    """All feature profiles of one model (cached one by one) and their summary."""
    n_obs = settings["n_obs"]
    n_explained = len(X) if n_obs is None else n_obs
    local, ice_min, ice_max, impact, pd_imp, grids = {}, {}, {}, {}, {}, {}
    prof = None
    for i, feature in enumerate(entry.features):
        step(feature, i)
        key = profile_key(ws, entry, feature, settings)
        prof = store.get(key)
        if prof is None:
            n_unique = X[feature].nunique(dropna=False)
            grid = "observed" if n_explained * n_unique <= settings["budget"] else QUANTILE_GRID
            prof = compute.feature_profile(model, X, y, feature, grid=grid, loss=ws.loss, output=ws.output,
                                           n_obs=n_obs, random_state=settings["seed"], n_jobs=n_jobs)
            store.put(key, prof)
        local[feature] = prof.local_importance
        ice_min[feature] = np.minimum(prof.pred.min(axis=1), prof.base_pred)
        ice_max[feature] = np.maximum(prof.pred.max(axis=1), prof.base_pred)
        impact[feature] = compute.ice_impact(prof) if len(prof.grid) > 1 else pd.Series(dtype=float)
        pd_imp[feature] = compute.pd_importance(prof)
        grids[feature] = {"n_grid": int(len(prof.grid)), "grid": prof.params.get("grid"),
                          "categorical": bool(prof.categorical)}
    base_pred = prof.base_pred
    if ws.task == "classification":
        out_range = (0.0, 1.0)
    else:
        out_range = (float(base_pred.min()), float(base_pred.max()))
    return {
        "features": list(entry.features),
        "rows": prof.rows,
        "local": pd.DataFrame(local, index=prof.rows),
        "ice_min": pd.DataFrame(ice_min, index=prof.rows),
        "ice_max": pd.DataFrame(ice_max, index=prof.rows),
        "base_pred": pd.Series(base_pred, index=prof.rows),
        "base_loss": pd.Series(prof.base_loss, index=prof.rows),
        "impact": pd.DataFrame(impact).T,
        "pd_importance": pd.Series(pd_imp),
        "grids": grids,
        "out_range": out_range,
    }


# --- aggregations of the summary (no model, no prediction) ---------------------------------
def conditional_pfi(summary: dict, mask: pd.Series | None = None, excluded=()) -> pd.DataFrame:
    """PFI of every feature as the mean ICI integral (Casalicchio et al. 2018, Eq. 9) over
    all explained rows, the subgroup, its complement and the rows left after excluding
    chosen observations (Sec. 6.2, Table 2 row 3). Grid and weights stay those of all data."""
    local = summary["local"]
    table = {"all": local.mean(axis=0)}
    counts = {"all": len(local)}
    if mask is not None:
        inside = mask.reindex(local.index).fillna(False).to_numpy(bool)
        table["subgroup"] = local[inside].mean(axis=0) if inside.any() else np.nan
        table["complement"] = local[~inside].mean(axis=0) if (~inside).any() else np.nan
        counts["subgroup"], counts["complement"] = int(inside.sum()), int((~inside).sum())
    if excluded:
        keep = ~local.index.isin(pd.Index([_label(e, local.index) for e in excluded]))
        table["without excluded"] = local[keep].mean(axis=0)
        counts["without excluded"] = int(keep.sum())
    frame = pd.DataFrame(table)
    frame.attrs["counts"] = counts
    return frame.sort_values("all", ascending=False)


def global_ci(summary: dict, mask: pd.Series | None = None) -> pd.DataFrame:
    """Global CI (Främling 2022, Sec. 4.1): the mean over explained rows of CI (Eq. 6),
    with ymin/ymax read off each row's ICE curve."""
    lo, hi = summary["out_range"]
    ci = (summary["ice_max"] - summary["ice_min"]) / (hi - lo if hi > lo else 1.0)
    if mask is not None:
        inside = mask.reindex(ci.index).fillna(False).to_numpy(bool)
        ci = ci[inside] if inside.any() else ci
    frame = pd.DataFrame({"CI": ci.mean(axis=0), "CI_std": ci.std(axis=0, ddof=0),
                          "out_of_range_share": (ci > 1 + 1e-12).mean(axis=0)})
    return frame.sort_values("CI", ascending=False)


def observation_ciu(summary: dict, row, *, utility: str = "increasing") -> pd.DataFrame:
    """CI, CU and contextual influence (Främling 2022, Eq. 6, 8, 10) of one explained row,
    read off its ICE curves (``compute.ciu_from_profiles`` on the summary's extremes)."""
    label = _label(row, summary["rows"])
    if label not in summary["ice_min"].index:
        raise compute.InputError(f"Observation {row!r} is not among the explained rows; pick a curve in the ICI view.")
    ymin = summary["ice_min"].loc[label].to_numpy(float)
    ymax = summary["ice_max"].loc[label].to_numpy(float)
    y = np.full(ymin.shape, float(summary["base_pred"].loc[label]))
    out = ciu_table(ymin, ymax, y, summary["out_range"], utility=utility)
    frame = pd.DataFrame(out, index=pd.Index(summary["features"], name="feature"))
    return frame[["CI", "CU", "influence", "ymin", "ymax", "y", "out_of_range"]]


def influential(prof: compute.FeatureProfile, k: int = 10, mask=None) -> pd.DataFrame:
    """The k most and k least influential explained rows (largest/smallest ICI integral)."""
    local = pd.Series(prof.local_importance, index=prof.rows, name="ici_integral")
    if mask is not None:
        local = local[np.asarray(mask, bool)]
    order = local.sort_values(ascending=False)
    top = order.head(k).to_frame().assign(rank="most influential")
    bottom = order.tail(k).iloc[::-1].to_frame().assign(rank="least influential")
    frame = pd.concat([top, bottom[~bottom.index.isin(top.index)]])
    frame.index.name = "row"
    frame.attrs["n_negative"] = int((local < 0).sum())
    frame.attrs["n"] = int(local.size)
    return frame
