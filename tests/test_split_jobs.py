"""Issue 12, one job over many workers: a job split into independent parts (one ICE/ICI
pass per model x feature, PFI per model x feature block), run in any order by any process
and joined, leaves exactly the results of the job run whole."""

from __future__ import annotations

import numpy as np
import pytest

import compute
import dashboard.samples
from dashboard import budgets, jobs, planning, row_groups, tasks
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import caveats, plan_state, whatif


def _ctx(tmp_path, name):
    return create_app(Config(cache_dir=str(tmp_path / name), max_curves=150, warm=False))._wip_context


def _missing(tmp_path, name: str, demo: str, kind: str, **state):
    """A fresh server's context on ``demo``, and the missing tasks of ``kind`` for the state."""
    ctx = _ctx(tmp_path, name)
    ws = ctx.store.workspace(demo)
    planned = plan_state(ctx, ws, normalize(ctx, {**default_state(), "ws": ws.id, **state})[0])
    return ctx, ws, planning.missing(ctx.store, [t for t in planned["tasks"] if t["kind"] == kind])


@pytest.mark.parametrize("subgroup", ["", "`worst radius` > 15"])
def test_a_split_job_leaves_the_results_of_the_whole_job_bit_for_bit(tmp_path, monkeypatch, subgroup):
    """The job keeps the sampled rows first (one sample for the curves, one per model for PFI);
    the parts then run in any order without the data set (the curves' parts read their
    sample and their column by row groups, PFI's their sample), and join to the whole job's numbers."""
    whole_ctx, split_ctx = _ctx(tmp_path, "whole"), _ctx(tmp_path, "split")
    results = {}
    for name, ctx in (("whole", whole_ctx), ("split", split_ctx)):
        ws = ctx.store.workspace("demo-cancer")
        state = normalize(ctx, {**default_state(), "ws": ws.id, "subgroup": subgroup})[0]
        planned = plan_state(ctx, ws, state)
        todo = planning.missing(ctx.store, [t for t in planned["tasks"] if t["kind"] in ("profiles", "pfi")])
        if name == "whole":
            jobs.run(ctx.store, ws, todo, policy=ctx.policy)
        else:
            parts, joins = jobs.split(ws, todo)
            assert {p["kind"] for p in parts} == {"sample", "profile_part", "pfi_part"}
            kept = [p for p in parts if p["kind"] == "sample"]
            assert parts[: len(kept)] == kept and len(kept) == 1 + len(ws.models) + (1 if subgroup else 0)
            jobs.run(ctx.store, ws, kept, policy=ctx.policy)
            parts = parts[len(kept) :]
            monkeypatch.setattr(ctx.store, "data", lambda ws: pytest.fail("a part read the whole data set"))
            n_features = len(ws.features)
            assert sum(p["kind"] == "profile_part" for p in parts) == n_features  # the focus model's passes
            # each model's PFI on the state's rows; on a subgroup also the focus model's PFI on all
            # rows, which the Subgroups table's all-rows column shows (the Overview bars of all rows)
            n_pfi = len(ws.models) + (1 if subgroup else 0)
            assert sum(p["kind"] == "pfi_part" for p in parts) == n_pfi * -(-n_features // tasks.PFI_BLOCK)
            order = np.random.default_rng(0).permutation(len(parts))  # any order, one part at a time
            for k in order:
                jobs.run(ctx.store, ws, [parts[k]], policy=ctx.policy)
            assert [t["key"] for t in planning.missing(ctx.store, joins)] == [t["key"] for t in joins]
            monkeypatch.undo()
            jobs.run(ctx.store, ws, joins, policy=ctx.policy)
            assert planning.missing(ctx.store, todo) == []
        results[name] = {
            "summary": ctx.store.get(planned["keys"]["summary"]),
            "profiles": {f: ctx.store.get(k) for f, k in planned["keys"]["profiles"].items()},
            "pfi": {m: ctx.store.get(k) for m, k in planned["keys"]["pfi"].items()},
        }
    whole, split = results["whole"], results["split"]
    for feature, prof in whole["profiles"].items():
        other = split["profiles"][feature]
        assert np.array_equal(prof.pred, other.pred) and np.array_equal(prof.loss_grid, other.loss_grid), feature
    for part in ("local", "ice_min", "ice_max", "impact"):
        assert whole["summary"].__getattribute__(part).equals(split["summary"].__getattribute__(part)), part
    assert whole["summary"].out_range == split["summary"].out_range
    for model, pfi in whole["pfi"].items():
        other = split["pfi"][model]
        assert list(other.repeats.index) == list(pfi.repeats.index)
        assert np.array_equal(pfi.repeats.to_numpy(), other.repeats.to_numpy()), model
        assert pfi.model_error == other.model_error and pfi.rows.equals(other.rows)
        assert (pfi.n_rows, pfi.n_total) == (other.n_rows, other.n_total), model


def _pfi_parts(ctx, subgroup: str):
    ws = ctx.store.workspace("demo-cancer")
    state = normalize(ctx, {**default_state(), "ws": ws.id, "subgroup": subgroup})[0]
    todo = [t for t in plan_state(ctx, ws, state)["tasks"] if t["kind"] == "pfi"]
    return ws, jobs.split(ws, planning.missing(ctx.store, todo))[0]


def test_parts_run_only_while_their_job_lives(tmp_path):
    """A worker's message of parts stops as soon as its job has ended (cancelled, killed or
    done): the job's flock is then free. While the job holds it, the parts are computed."""
    from dashboard.callbacks.compute import _run_parts

    ctx = _ctx(tmp_path, "alive")
    ws, parts = _pfi_parts(ctx, "`mean radius` > 13")
    assert jobs.job_ended(ctx.store, "ended")
    assert _run_parts(ctx, ws, parts[:3], "ended") == 0  # no process holds the job's lock
    assert planning.missing(ctx.store, parts[:3]) == parts[:3]
    with jobs.job_alive(ctx.store, "alive"):
        assert not jobs.job_ended(ctx.store, "alive")
        assert _run_parts(ctx, ws, parts[:3], "alive") == 3
    assert jobs.job_ended(ctx.store, "alive")  # released with the job
    assert planning.missing(ctx.store, parts[:3]) == []
    assert _run_parts(ctx, ws, parts[:3], None) == 0  # done already: nothing to compute


def test_cancel_revokes_the_parts_its_job_queued(tmp_path):
    """Cancel reads the ids the job stored under its token (from the request's nonce) and
    revokes them, terminating the running ones; a request without a job's nonce, or of
    another job, revokes nothing."""
    from dataclasses import replace

    from dashboard.callbacks import compute as compute_callbacks

    ctx = _ctx(tmp_path, "cancel")
    ctx = replace(ctx, config=replace(ctx.config, celery_broker="redis://fake:1/0"))
    calls = []

    class Control:
        def revoke(self, ids, **options):
            calls.append((ids, options))

    class App:
        control = Control()

    compute_callbacks._CONTROLLERS["redis://fake:1/0"] = App()
    try:
        request = {"state": {}, "request": "r", "nonce": "0123456789abcdef"}
        token = compute_callbacks.job_token(request)
        ctx.store.put(compute_callbacks.sent_key(token), ["id-1", "id-2"])
        assert compute_callbacks.cancel_parts(ctx, {**request, "nonce": "fedcba9876543210"}) == []
        assert compute_callbacks.cancel_parts(ctx, {"state": {}}) == []
        assert calls == []
        assert compute_callbacks.cancel_parts(ctx, request) == ["id-1", "id-2"]
        assert calls == [(["id-1", "id-2"], {"terminate": True, "signal": "SIGTERM"})]
    finally:
        compute_callbacks._CONTROLLERS.pop("redis://fake:1/0", None)


def test_a_split_job_keeps_the_pairs_a_subgroup_reuses(tmp_path, monkeypatch):
    """On a sample (large data), the all-rows PFI's parts keep their pairs, the join keeps them
    and the subgroup's share is derived after it: bit for bit the job run whole."""
    # a 120-row sample of the cancer demo's 171 (its models predict deterministically; the
    # X3 demo's forest, with n_jobs=-1, adds its trees' predictions in the threads' order)
    monkeypatch.setattr(budgets, "PFI_BUDGET", 36_000)
    monkeypatch.setattr(budgets, "WALKED_PFI_FACTOR", 1)  # the walked boosting model too
    monkeypatch.setattr(budgets, "PFI_MIN_ROWS", 10)
    found = {}
    for name in ("whole", "split"):
        ctx = _ctx(tmp_path, name)
        ws = ctx.store.workspace("demo-cancer")
        state = normalize(ctx, {**default_state(), "ws": ws.id, "subgroup": "`worst radius` > 15"})[0]
        planned = plan_state(ctx, ws, state)
        todo = planning.missing(ctx.store, [t for t in planned["tasks"] if t["kind"] == "pfi"])
        if name == "whole":
            jobs.run(ctx.store, ws, todo, policy=ctx.policy)
        else:
            parts, joins = jobs.split(ws, todo)
            assert [p["kind"] for p in parts[: len(ws.models)]] == ["sample"] * len(ws.models)
            assert all(p["kind"] == "pfi_part" and p["params"].get("keep") for p in parts[len(ws.models) :])
            # from the last: each sample computed by the first part reading it, kept for the others
            assert [j["params"].get("pairs") is not None for j in joins] == [False, True] * len(ws.models)
            for part in reversed(parts):
                jobs.run(ctx.store, ws, [part], policy=ctx.policy)
            jobs.run(ctx.store, ws, joins, policy=ctx.policy)
        found[name] = {m: ctx.store.get(k) for m, k in planned["keys"]["pfi"].items()}
    for model, pfi in found["whole"].items():
        other = found["split"][model]
        assert pfi.n_pairs is not None and pfi.n_pairs.equals(other.n_pairs)
        assert (pfi.n_rows, pfi.n_total) == (other.n_rows, other.n_total), model
        assert np.array_equal(pfi.repeats.to_numpy(), other.repeats.to_numpy()), model


def test_an_exact_sfimp_split_into_coalition_batches_equals_the_whole_task(tmp_path):
    """SFIMP over 10 features (the diabetes demo): its 1,024 coalitions in SFIMP_PARTS
    batches, run in any order and joined, equal the task run whole: bit for bit for the
    ridge model, to rounding for the forest (n_jobs=-1 adds its trees in thread order)."""
    found = {}
    for name in ("whole", "split"):
        ctx, ws, todo = _missing(tmp_path, name, "demo-diabetes", "sfimp", sfimp=True)
        assert len(todo) == 2 and len(ws.features) == 10
        if name == "whole":
            jobs.run(ctx.store, ws, todo, policy=ctx.policy)
        else:
            parts, joins = jobs.split(ws, todo)
            assert [p["kind"] for p in parts] == ["sfimp_part"] * 2 * tasks.SFIMP_PARTS
            assert sorted(p["params"]["masks"][0] for p in parts[: tasks.SFIMP_PARTS]) == [0, 256, 512, 768]
            for k in np.random.default_rng(1).permutation(len(parts)):
                jobs.run(ctx.store, ws, [parts[k]], policy=ctx.policy)
            jobs.run(ctx.store, ws, joins, policy=ctx.policy)
        found[name] = {t["model"]: ctx.store.get(t["key"]) for t in todo}  # every model's SFIMP (a fresh cache)
    for model, whole in found["whole"].items():
        split = found["split"][model]
        assert whole.exact and split.exact and split.n_rows == whole.n_rows
        if model == "ridge":
            assert np.array_equal(whole.values.to_numpy(), split.values.to_numpy())
            assert np.array_equal(whole.row_std_error.to_numpy(), split.row_std_error.to_numpy())
        else:
            np.testing.assert_allclose(whole.values.to_numpy(), split.values.to_numpy(), rtol=1e-9)


def test_a_part_being_computed_elsewhere_is_passed_over_not_waited_for(tmp_path):
    """jobs.run(wait=False) skips a task whose lock another process holds and returns it (the
    split job waits for such parts only after doing the others); a free one is computed."""
    ctx = _ctx(tmp_path, "busy")
    ws, parts = _pfi_parts(ctx, "`mean radius` > 14")
    with jobs.task_lock(ctx.store, parts[0]["key"]) as held:
        assert held
        busy = jobs.run(ctx.store, ws, parts[:2], policy=ctx.policy, wait=False)
        assert busy == [parts[0]] and planning.missing(ctx.store, parts[:2]) == [parts[0]]
    assert jobs.run(ctx.store, ws, parts[:2], policy=ctx.policy, wait=False) == []
    assert planning.missing(ctx.store, parts[:2]) == []


def test_a_large_job_is_sent_in_more_messages_so_its_parts_reach_every_worker():
    """Four messages at least (each costs a worker a process and a model load), at most eight
    parts each: 300 row-group and feature parts are not held to four workers."""
    from dashboard.callbacks.compute import PARTS_PER_MESSAGE, part_messages

    for n, sizes in ((1, [1]), (10, [3, 3, 3, 1]), (32, [8, 8, 8, 8]), (33, [8, 8, 8, 8, 1])):
        messages = part_messages(list(range(n)))
        assert [len(m) for m in messages] == sizes and [p for m in messages for p in m] == list(range(n))
    assert len(part_messages(list(range(300)))) == -(-300 // PARTS_PER_MESSAGE) == 38


@pytest.mark.parametrize("subgroup", ["", "`worst radius` > 15"])
def test_importance_once_the_others_are_known_split_in_feature_blocks_equals_the_whole_task(
    tmp_path, monkeypatch, subgroup
):
    """cs-PFI of the cancer demo's 30 features: the bars' sampled rows kept first, then 3
    parts of 10 features (each its trees and permutations, the streams its features have in
    the whole call) run in any order on that sample without the data set, and joined: the
    whole task's importances, standard errors, leaves, covariance and rows."""
    results = {}
    for name in ("whole", "split"):
        ctx, ws, todo = _missing(tmp_path, name, "demo-cancer", caveats.CS_KIND, subgroup=subgroup)
        assert len(todo) == 1
        if name == "split":
            parts, joins = jobs.split(ws, todo)
            assert [p["kind"] for p in parts] == ["sample"] + [caveats.CS_PART_KIND] * 3 and len(joins) == 1
            jobs.run(ctx.store, ws, parts[:1], policy=ctx.policy)
            parts = parts[1:]
            assert [len(p["params"]["features"]) for p in parts] == [10, 10, 10]
            with monkeypatch.context() as patched:
                patched.setattr(ctx.store, "data", lambda ws: pytest.fail("a part read the whole data set"))
                for k in (2, 0, 1):
                    jobs.run(ctx.store, ws, [parts[k]], policy=ctx.policy)
            todo = joins
        jobs.run(ctx.store, ws, todo, policy=ctx.policy)
        results[name] = ctx.store.get(todo[0]["key"])
    whole, split = results["whole"], results["split"]
    assert list(split.features) == list(whole.features) and len(whole.features) == 30
    assert np.array_equal(whole.conditional.repeats.to_numpy(), split.conditional.repeats.to_numpy())
    assert whole.std_error.equals(split.std_error)
    assert all(whole.subgroups[f].equals(split.subgroups[f]) for f in whole.features)
    assert whole.conditioned_on == split.conditioned_on
    assert whole.conditional.rows.equals(split.conditional.rows)
    assert (whole.conditional.n_rows, whole.conditional.n_total) == (
        split.conditional.n_rows,
        split.conditional.n_total,
    )
    cov_whole, cov_split = whole.conditional.row_covariance, split.conditional.row_covariance
    assert cov_whole is not None and cov_split is not None
    np.testing.assert_allclose(cov_split.to_numpy(), cov_whole.to_numpy(), rtol=1e-9, atol=1e-15)


def test_on_data_of_several_row_groups_workers_get_only_the_parts_reading_their_own_rows(tmp_path, monkeypatch):
    """A worker would fetch the whole data set for a part that reads it (H statistics, the
    grouped PFI): on a data set of one row group every part but the samples is sent; on
    more, only the parts reading their sample or their rows, and the job does the rest."""
    ctx = _ctx(tmp_path, "sent")
    ws = ctx.store.workspace("demo-cancer")
    state = normalize(ctx, {**default_state(), "ws": ws.id})[0]
    parts, _ = jobs.split(ws, planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"]))
    samples = [p for p in parts if p["kind"] == "sample"]
    ahead = [p for p in parts if jobs.spec_for(p["kind"]).first]  # and the predictions, whole on small data
    assert samples and {p["kind"] for p in ahead} == {"sample", "predictions"}
    assert jobs.for_workers(ws, parts) == [p for p in parts if p not in ahead]  # 569 rows: one row group
    assert any(not dashboard.samples.reads_own_rows(p) for p in parts if p not in ahead)  # some read the data set
    monkeypatch.setattr(row_groups, "ROW_GROUP_ROWS", 100)
    sent = jobs.for_workers(ws, parts)
    assert {p["kind"] for p in sent} == {"profile_part", "pfi_part", caveats.CS_PART_KIND, whatif.GRIDS_PART.kind}
    grids = [p for p in sent if p["kind"] == whatif.GRIDS_PART.kind]  # their features' columns alone
    assert [f for p in grids for f in p["params"]["features"]] == list(ws.model(state["model"]).features)
    assert [p for p in sent if p not in grids] == [p for p in parts if p["params"].get("sample") in samples]


def test_the_what_if_grids_come_in_parts_with_the_curves_and_the_what_if_reads_them(tmp_path, monkeypatch):
    """The grids of the what-if (every feature's, the same for every row) are planned in the
    first round, with the curves: in parts of a few features, each reading its features'
    columns alone (by row groups, the data set unreadable), joined to the grids of the whole
    call; the default row's what-if, planned once the curves name it, reads them and builds
    none."""
    ctx = _ctx(tmp_path, "grids")
    ws = ctx.store.workspace("demo-cancer")
    state = normalize(ctx, {**default_state(), "ws": ws.id})[0]
    planned = plan_state(ctx, ws, state)
    assert not [t for t in planned["tasks"] if t["kind"] == whatif.KIND]  # no row named yet
    (task,) = [t for t in planned["tasks"] if t["kind"] == whatif.GRIDS_KIND]
    assert planned["keys"][whatif.GRIDS_KIND] == {task["model"]: task["key"]}
    parts, joins = jobs.split(ws, [task])
    features = list(ws.model(task["model"]).features)
    assert len(parts) == -(-len(features) // whatif.GRIDS_BLOCK) and all(p["params"]["columns"] for p in parts)
    monkeypatch.setattr(ctx.store, "data", lambda ws: pytest.fail("a part read the whole data set"))
    monkeypatch.setattr(row_groups, "ROW_GROUP_ROWS", 100)  # its columns by row groups, as a worker reads them
    for part in reversed(parts):
        jobs.run(ctx.store, ws, [part], policy=ctx.policy)
    monkeypatch.undo()
    jobs.run(ctx.store, ws, joins, policy=ctx.policy)
    kept = ctx.store.get(task["key"])
    whole = compute.what_if_grids(ctx.store.data(ws)[features], whatif.GRID)
    assert list(kept) == features
    for f in features:
        np.testing.assert_array_equal(kept[f].values, whole[f].values)
        np.testing.assert_array_equal(kept[f].weights, whole[f].weights)
        assert kept[f].categorical == whole[f].categorical
    monkeypatch.setattr(compute, "what_if_grids", lambda *a, **k: pytest.fail("the what-if built its grids again"))
    jobs.run(ctx.store, ws, [t for t in planned["tasks"] if t["kind"] == "profiles"], policy=ctx.policy)
    second = plan_state(ctx, ws, state)  # the curves now name the default row
    (what_if,) = [t for t in second["tasks"] if t["kind"] == whatif.KIND]
    jobs.run(ctx.store, ws, [what_if], policy=ctx.policy)
    assert ctx.store.get(what_if["key"]).grids.keys() >= set(features)


def test_a_split_job_sends_the_parts_reading_no_sample_before_it_keeps_the_samples(tmp_path, monkeypatch):
    """The job plans a plain state without reading the data set, and sends the parts that read
    only their own rows or columns (the predictions on every row, the what-if grids) before it
    reads it to keep the samples: the workers start at once. The parts reading a sample follow,
    once the samples are kept; every sent part is sent once."""
    from dashboard.callbacks import compute as job

    monkeypatch.setattr(row_groups, "ROW_GROUP_ROWS", 100)  # 569 rows: six row groups
    ctx = _ctx(tmp_path, "early")
    ws = ctx.store.workspace("demo-cancer")
    with monkeypatch.context() as m:
        m.setattr(ctx.store, "data", lambda ws: pytest.fail("a plain state's plan read the data set"))
        state = normalize(ctx, {**default_state(), "ws": ws.id})[0]
        parts, joins = jobs.split(ws, planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"]))
    samples = [p for p in parts if p["kind"] == "sample"]
    calls = []

    def send(ctx, ws, sent, token):
        calls.append((sent, not planning.missing(ctx.store, samples)))  # the samples kept by then?
        return [f"id{len(calls)}-{k}" for k in range(len(sent))]

    monkeypatch.setattr(job, "send_parts", send)
    job._run_split(ctx, ws, parts, joins, lambda *a: None, "job-token")
    (first, kept_then), (then, kept_later) = calls
    assert not kept_then and kept_later
    assert first and all(not p["params"].get("sample") for p in first)
    assert {p["kind"] for p in first} == {"predictions_part", whatif.GRIDS_PART.kind}
    assert then and all(p["params"].get("sample") in samples for p in then)
    assert sorted(map(str, first + then)) == sorted(map(str, jobs.for_workers(ws, parts)))
    assert ctx.store.get(job.sent_key("job-token")) == [f"id1-{k}" for k in range(len(first))] + [
        f"id2-{k}" for k in range(len(then))
    ]
    assert not planning.missing(ctx.store, parts + joins)  # and the job did them all itself
