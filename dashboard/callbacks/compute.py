"""From a state to cached results: resolve at once when cached, else run a background job.

``resolve`` (a plain callback) plans the cache keys the state needs. When every one is
cached it hands them to the views straight away (a feature or subgroup switch costs a
few cache reads); otherwise it posts a job request. ``run_job`` is a Dash background
callback: it runs in a forked child of the worker with a progress bar and a Cancel
button, loads the models there (a model that crashes kills the child, not the worker)
and fills the cache; its completion triggers ``resolve`` again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import secrets
import time
import traceback
from dataclasses import dataclass

from dash import Input, Output, State, callback_context, no_update

import compute

from .. import ids, jobs, planning, samples, warm
from ..isolation import isolated
from ..quota import client_key
from ..resolve import Resolved
from ..state import clean_state
from ..views import needed_specs, resolve, settle, signatures

log = logging.getLogger(__name__)


def request_id(tasks: list[dict]) -> str:
    return hashlib.sha256(json.dumps(sorted(t["key"] for t in tasks)).encode()).hexdigest()[:20]


def _readable(ctx, keys: dict, state: dict) -> bool:
    """Read (and checksum) every entry the views will read; each damaged one is dropped by
    the store, all of them in this one pass, so the job the page then waits for computes
    them all again rather than the views showing them as missing."""
    needed = {k for spec in needed_specs() for k in spec.keys_read(keys, state) if k}
    intact = [ctx.store.intact(k) for k in sorted(needed)]  # no short cut: every one is read
    return all(intact)


def _trusted(ctx, raw) -> Resolved | None:
    """Whatever the browser sent as a state, resolved once for this request: cleaned, made
    valid for its workspace by the controller's own rules, planned (``views.resolve``).
    None when it names no data set, or one not available."""
    if not isinstance(raw, dict) or not raw.get("ws"):
        return None
    return resolve(ctx, raw)


@dataclass(frozen=True)
class Resolution:
    """What resolving a state gives the page: the views' results record, a job request
    (when something is missing) and a status line; each may be ``no_update``."""

    results: object
    request: object
    status: object

    def outputs(self) -> dict:
        """The named outputs of the resolve callback."""
        return {"results": self.results, "request": self.request, "status": self.status}


def _derive(ctx, r: Resolved, todo: list[dict]) -> list[dict]:
    """The missing tasks less those derived here and now: a subgroup's PFI from cached
    all-rows pairs needs no model, so a subgroup switch on large data waits for no job."""
    if not any(jobs.spec_for(t["kind"]).derive is not None for t in todo):
        return todo
    try:
        return [t for t in todo if not jobs.derive(ctx.store, r.ws, t, r.data)]
    except compute.ExplainError:  # e.g. too few rows: the job says so next to the views
        return todo


def _quick(ctx, ws, todo: list[dict], client: str | None) -> list[dict]:
    """The missing tasks less the quick ones (a what-if) computed here and now in a warm
    model process (:mod:`dashboard.warm`); what it could not do goes to the job."""
    quick = [t for t in todo if jobs.spec_for(t["kind"]).quick]
    if not quick:
        return todo
    if client is not None:
        try:
            ctx.slots.check_budget(client, ctx.config.client_results_bytes)
        except compute.ExplainError:  # over its budget: the job says so
            return todo
    left, written = warm.run_quick(ctx, ws, quick, client or "")
    if client is not None and written > 0:
        ctx.slots.charge(client, written)
    return [t for t in todo if t not in quick or t in left]


def resolve_state(ctx, state: dict | None, done: dict | None, client: str | None = None) -> Resolution:
    """The state's results when all are cached, else a job request for the missing ones.
    ``client``: the page's own request (its address): quick tasks are computed at once."""
    if not isinstance(state, dict) or not state.get("ws"):
        return Resolution(no_update, no_update, no_update)
    r = _trusted(ctx, state)
    if r is None:
        return Resolution({"error": f"Data set {clean_state(state)['ws']!r} is not available."}, no_update, None)
    state, ws = dict(r.state), r.ws  # a copy: the resolution is shared by later requests
    todo = _derive(ctx, r, planning.missing(ctx.store, r.tasks))
    if client is not None:
        todo = _quick(ctx, ws, todo, client)
    if not todo and not _readable(ctx, r.keys, state):
        todo = _derive(ctx, r, planning.missing(ctx.store, r.tasks))  # damaged entries were dropped
    rid = request_id(r.tasks)
    sigs = signatures(ctx.store, r.shown, r.keys)
    if not todo:
        return Resolution({"state": state, "keys": r.keys, "sigs": sigs}, no_update, None)
    if isinstance(done, dict) and done.get("request") == rid:
        if done.get("error"):
            return Resolution({"error": str(done["error"]), "state": state}, no_update, str(done["error"]))
        if done.get("ok"):  # finished, yet results are missing: the cache evicted them at once
            message = (
                "The results did not fit in the result cache (its size limit is too small for them); "
                "raise --cache-size-mb."
            )
            return Resolution({"error": message, "state": state}, no_update, message)
    # The request names the state only: the job plans its tasks, keys and parameters again
    # from it (run_request), so nothing else a browser puts in a request is ever used.
    # The nonce gives each session's job its own result slot: Dash names a job's result after
    # its arguments, and sessions asking for the same results at once would otherwise share
    # (and steal) one slot. jobs.run locks per task, so the work itself is done once.
    request = {"state": state, "request": rid, "nonce": secrets.token_hex(8)}
    what = jobs.spec_for(todo[0]["kind"]).label or "results"  # the first task the job runs
    # The views re-render at once for the new state: what is cached shows, the rest waits;
    # nothing of the previous state (another data set, subgroup or feature) stays on screen.
    pending = {"state": state, "keys": r.keys, "pending": True, "sigs": sigs}
    return Resolution(pending, request, f"Computing {what} for {ws.title}…")


def run_request(ctx, request, set_progress=None, client: str | None = None) -> dict:
    """Body of the background job: plan the state's tasks on the server and compute the
    missing ones into the cache, in an isolated process with the job limits. ``client``
    (its address, as the page's request came from): the job runs in one of that client's
    slots (``ctx.slots``), waiting its turn when the server's are all taken. The job keeps
    its record (:func:`jobs.job_record`) for the page's watchdog: running, then its outcome."""
    token = job_token(request if isinstance(request, dict) else {})
    with jobs.job_record(ctx.store, token) as finish:
        outcome = _run_request(ctx, request, set_progress, client)
        if page_nonce(request):
            outcome["nonce"] = page_nonce(request)  # which of the page's requests ended
        finish(outcome)
    return outcome


def _run_request(ctx, request, set_progress=None, client: str | None = None) -> dict:

    def progress(done, total, label):
        if set_progress is not None:
            set_progress((str(done), str(max(total, 1)), label))

    rid = None
    r: Resolved | None = None
    try:
        r = _trusted(ctx, request.get("state") if isinstance(request, dict) else None)
        if r is None:
            raise compute.InputError("The data set of this page is not available; reload the page.")
        rid = request_id(r.tasks)
        # every result of the state read and checksummed: a damaged one is computed again now
        todo = planning.missing(ctx.store, r.tasks, verify=True)
        if todo:
            if client is not None:
                ctx.slots.check_budget(client, ctx.config.client_results_bytes)
            with _slot(ctx, client, progress):
                # the curves just computed name the default observation: its what-if and
                # contributions are planned then, and computed in the same process
                stored = _compute(ctx, r.ws, todo, request, progress, unsettled=r)
                r = settle(ctx, r)
                more = planning.missing(ctx.store, r.tasks, verify=True)
                if more:
                    stored += _compute(ctx, r.ws, more, request, progress)
            if client is not None:
                ctx.slots.charge(client, stored)
        return {"request": _final_id(ctx, r, rid), "ok": True}
    except compute.ExplainError as exc:
        return {"request": _final_id(ctx, r, rid), "error": str(exc)}
    except Exception as exc:  # a bug or a model failure we did not anticipate: log it, show a notice
        log.error("background job failed: %s\n%s", exc, traceback.format_exc())
        first_line = str(exc).splitlines()[0][:300] if str(exc) else ""
        return {
            "request": _final_id(ctx, r, rid),
            "error": f"The computation failed ({type(exc).__name__}: {first_line}). "
            "Try another model or data set; the server keeps running.",
        }


def _final_id(ctx, r: Resolved | None, rid):
    """The request id the page matches the job's end with: as the page plans it then (the
    curves the job computed name the default observation, whose tasks join the plan: a
    resolution still waiting for it is planned again), so an error is shown rather than
    taken for a stopped job."""
    if r is None:
        return rid
    try:
        return request_id(settle(ctx, r).tasks)
    except Exception:  # noqa: BLE001 - the id planned at the start, as before
        return rid


def _slot(ctx, client: str | None, progress):
    """The client's computation slot (nothing to hold for a caller that names no client)."""
    if client is None:
        return contextlib.nullcontext()
    return ctx.slots.hold(
        client,
        timeout=ctx.config.job_timeout,
        waiting=lambda n: progress(0, 1, f"waiting for a free slot: {n} computations are running"),
    )


def _compute(ctx, ws, todo, request, progress, unsettled: Resolved | None = None) -> int:
    """Compute the missing tasks in an isolated process; returns the result bytes it stored
    (a split job's: its own share, parts done by Celery workers not counted). ``unsettled``:
    a resolution waiting for its default observation: the tasks the curves add (the row's
    what-if and contributions) are computed then, by this process, which holds the data set."""
    names = ", ".join(sorted({t["model"] for t in todo}))
    parts, joins = jobs.split(ws, todo) if ctx.config.celery_broker else ([], [])

    def job() -> int:
        if len(parts) > 1:  # Celery workers: one job over many processes and machines
            stored = _run_split(ctx, ws, parts, joins, progress, job_token(request))
        else:
            stored = _run_tasks(ctx, ws, todo, progress)
        return stored + (_second_round(ctx, unsettled, progress) if unsettled is not None else 0)

    return isolated(job, what=f"Model {names}", limits=ctx.job_limits)


def _second_round(ctx, unsettled: Resolved, progress) -> int:
    """The tasks a resolution gains once the curves name its default observation."""
    r = settle(ctx, unsettled)
    more = planning.missing(ctx.store, r.tasks, verify=True)
    return _run_tasks(ctx, r.ws, more, progress) if more else 0


def _run_tasks(ctx, ws, tasks, progress) -> int:
    before = ctx.store.bytes_written
    jobs.run(ctx.store, ws, tasks, policy=ctx.policy, n_jobs=ctx.config.n_jobs, progress=progress)
    return ctx.store.bytes_written - before


PART_MESSAGES = 4  # messages a split job's parts are sent in at least (each a few parts, from the first)
PARTS_PER_MESSAGE = 8  # and parts per message at most: a large job's parts reach every worker


def part_messages(parts: list) -> list[list]:
    """A split job's parts as the messages they are sent in, in order: PART_MESSAGES of them,
    or more of PARTS_PER_MESSAGE parts each (a job of 300 row-group and feature parts is not
    held to 4 workers); each message costs a worker a process and a model load."""
    size = max(1, min(-(-len(parts) // PART_MESSAGES), PARTS_PER_MESSAGE))
    return [parts[k : k + size] for k in range(0, len(parts), size)]


_NONCE = re.compile(r"[0-9a-f]{16}")


def page_nonce(request) -> str | None:
    """The nonce of a job request as the server made it (16 hex digits), None for any other
    value: only such a nonce is echoed back to the page."""
    nonce = request.get("nonce") if isinstance(request, dict) else None
    return nonce if isinstance(nonce, str) and _NONCE.fullmatch(nonce) else None


def job_token(request: dict) -> str:
    """Names a split job for its parts and for Cancel: derived from the request's nonce,
    which only the session that asked for the job holds (a fresh random one without it)."""
    nonce = str(request.get("nonce") or secrets.token_hex(8))
    # a forged nonce may hold lone surrogates, which plain UTF-8 refuses
    return hashlib.sha256(("job:" + nonce).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def sent_key(token: str) -> str:
    """Cache key of the Celery task ids a split job queued (read by Cancel to revoke them)."""
    return "sent-parts-" + token


def _celery(broker: str):
    from celery import Celery

    return Celery("why_it_performs", broker=broker, backend=broker)


def send_parts(ctx, ws, parts: list[dict], token: str) -> list[str]:
    """Queue each part of a split job as a Celery task (``jobs.PART_TASK``) for any worker;
    returns their task ids. The job works through the same parts itself, from the last:
    with one worker it does them all (the queued ones then find them done), with N workers
    they share them. Each part runs only while the job holds its ``jobs.job_alive`` lock."""
    if not parts:
        return []
    sender = _celery(ctx.config.celery_broker)  # a connection of this job process's own
    chunks = part_messages(parts)
    try:
        return [sender.send_task(jobs.PART_TASK, args=[ws.id, chunk, token]).id for chunk in chunks]
    finally:
        sender.close()


_CONTROLLERS: dict = {}


def cancel_parts(ctx, request) -> list[str]:
    """Cancel: revoke the Celery tasks the cancelled job queued. Those still in the queue are
    dropped by the workers; those running are stopped (their model process dies with them).
    Parts a worker takes later skip themselves anyway, as the job's lock is gone. Returns the
    revoked task ids."""
    broker = ctx.config.celery_broker
    if not broker or not isinstance(request, dict) or not request.get("nonce"):
        return []
    ids = ctx.store.get(sent_key(job_token(request)))
    if not ids:
        return []
    if broker not in _CONTROLLERS:
        _CONTROLLERS[broker] = _celery(broker)
    _CONTROLLERS[broker].control.revoke(list(ids), terminate=True, signal="SIGTERM")
    log.info("cancelled a split job: revoked %d queued part messages", len(ids))
    return list(ids)


def run_parts(ctx, ws, tasks, token: str | None = None) -> int:
    """A message of parts sent to a worker, in an isolated process with the job limits;
    returns how many parts this process computed. Parts stop as soon as their job has ended
    (cancelled, failed or done)."""
    names = ", ".join(sorted({t["model"] for t in tasks}))
    return isolated(_run_parts, ctx, ws, tasks, token, what=f"Model {names}", limits=ctx.job_limits)


def _run_parts(ctx, ws, tasks, token) -> int:
    models: dict = {}
    computed = 0
    for part in tasks:
        if token and jobs.job_ended(ctx.store, token):
            log.info("job part skipped: its job has ended")
            break
        if planning.missing(ctx.store, [part]):  # one being computed elsewhere is left to them
            computed += not _run_part(ctx, ws, part, models)
    return computed


def _run_part(ctx, ws, part: dict, models: dict) -> list[dict]:
    """One part, unless another process is computing it (then returned, not waited for)."""
    return jobs.run(ctx.store, ws, [part], policy=ctx.policy, n_jobs=ctx.config.n_jobs, models=models, wait=False)


def _run_split(ctx, ws, parts, joins, progress, token, *, send: bool = True) -> int:
    """The job's own share of a split job: hold the job's lock, queue the parts that read no
    sample for the workers, keep the samples the others read (``TaskSpec.first``:
    :mod:`dashboard.samples`, from the data set this process reads meanwhile, so no worker
    fetches it whole), queue those (:func:`dashboard.jobs.for_workers`: on large data only
    the parts reading their own rows go to workers), then do
    the parts itself from the last (workers take them from the first; a part done is
    skipped, one being computed elsewhere is passed over and waited for, through its lock,
    once the others are done), then the joins. Progress counts finished parts.
    ``send=False``: no queueing (the job alone, as a benchmark's baseline)."""
    total = len(parts) + len(joins)
    before = ctx.store.bytes_written
    models: dict = {}  # loaded once for all the parts this process does
    with jobs.job_alive(ctx.store, token):
        ahead = [p for p in parts if jobs.spec_for(p["kind"]).first]  # the samples the others read
        sent = jobs.for_workers(ws, parts) if send else []
        later = [p for p in sent if samples.reads_sample(p)]
        # the parts reading no sample first: workers start while this process keeps the samples
        queued = send_parts(ctx, ws, [p for p in sent if p not in later], token)
        ctx.store.put(sent_key(token), queued)
        if ahead:
            progress(0, total, "keeping the sampled rows for the workers")
            jobs.run(ctx.store, ws, ahead, policy=ctx.policy, n_jobs=ctx.config.n_jobs, models=models)
        if later:
            queued += send_parts(ctx, ws, later, token)
            ctx.store.put(sent_key(token), queued)
        busy: list[dict] = []  # parts another process is computing: waited for once the rest are done
        for k, part in enumerate(reversed(parts)):
            progress(k, total, f"part {k + 1} of {len(parts)} ({part['kind'].replace('_', ' ')}, {part['model']})")
            busy += _run_part(ctx, ws, part, models)
        if busy:
            progress(len(parts) - len(busy), total, f"waiting for {len(busy)} parts computed elsewhere")
            jobs.run(ctx.store, ws, busy, policy=ctx.policy, n_jobs=ctx.config.n_jobs, models=models)
        progress(len(parts), total, "joining the parts")
        jobs.run(ctx.store, ws, joins, policy=ctx.policy, n_jobs=ctx.config.n_jobs, models=models)
    progress(total, total, "done")
    return ctx.store.bytes_written - before


# the outputs a job's end sets: the views' results record, the status line, Retry
OUTCOME = {
    "results": Output(ids.RESULTS, "data", allow_duplicate=True),
    "status": Output(ids.STATUS, "children", allow_duplicate=True),
    "retry": Output(ids.RETRY, "style", allow_duplicate=True),
}


def register(app, ctx) -> None:
    register_jobs(app, ctx)
    register_watchdogs(app, ctx)


def register_jobs(app, ctx) -> None:
    """resolve (a state to its results, or a job request), the background job, and finish."""

    # STATE -> resolve -> JOB_REQUEST -> run_job -> JOB_DONE -> finish -> RESULTS: no cycle
    # (the renderer would not re-run a callback that fed the job that just finished).
    @app.callback(
        output={
            "results": Output(ids.RESULTS, "data"),
            "request": Output(ids.JOB_REQUEST, "data"),
            "status": Output(ids.STATUS, "children"),
            "retry": Output(ids.RETRY, "style"),
        },
        inputs={"state": Input(ids.STATE, "data"), "retry": Input(ids.RETRY, "n_clicks")},
    )
    def resolve(state, retry):
        # Retry resolves the same state again: what is still missing gets a new job (a new nonce)
        return resolve_state(ctx, state, None, client_key(callback_context.remote)).outputs() | {"retry": HIDDEN}

    @app.callback(
        Output(ids.JOB_DONE, "data"),
        Input(ids.JOB_REQUEST, "data"),
        background=True,
        progress=[Output(ids.PROGRESS, "value"), Output(ids.PROGRESS, "max"), Output(ids.PROGRESS_LABEL, "children")],
        running=[
            (Output(ids.CANCEL, "disabled"), False, True),
            (Output(ids.PROGRESS_BOX, "style"), {"visibility": "visible"}, {"visibility": "hidden"}),
            (Output(ids.JOB_ACTIVE, "data"), True, False),
            (Output(ids.JOB_WATCH, "disabled"), False, True),
        ],
        cancel=[Input(ids.CANCEL, "n_clicks")],
        interval=150,  # ms between polls of a running job (a what-if answers in one or two)
        prevent_initial_call=True,
    )
    def run_job(set_progress, request):
        if not request:
            return no_update
        return run_request(ctx, request, set_progress, client=client_key(callback_context.remote))

    @app.callback(
        output=OUTCOME,
        inputs={
            "done": Input(ids.JOB_DONE, "data"),
            "state": State(ids.STATE, "data"),
            "request": State(ids.JOB_REQUEST, "data"),
        },
        prevent_initial_call=True,
    )
    def finish(done, state, request):
        return finish_job(ctx, state, done, request)


def register_watchdogs(app, ctx) -> None:
    """Cancel, and the watchdogs that never let the page wait for a job that is gone."""

    @app.callback(
        Output(ids.STATUS, "children", allow_duplicate=True),
        Output(ids.RETRY, "style", allow_duplicate=True),
        Input(ids.CANCEL, "n_clicks"),
        State(ids.JOB_REQUEST, "data"),
        prevent_initial_call=True,
    )
    def cancelled(_n, request):
        if isinstance(request, dict) and request.get("nonce"):
            jobs.job_cancelled(ctx.store, job_token(request))  # its end is no failure for the watchdog
        try:
            cancel_parts(ctx, request)
        except Exception as exc:  # the broker unreachable: the parts still skip themselves
            log.warning("could not revoke the job's parts: %s", exc)
        return CANCELLED, SHOWN

    @app.callback(
        output=OUTCOME,
        inputs={
            "active": Input(ids.JOB_ACTIVE, "data"),
            "state": State(ids.STATE, "data"),
            "done": State(ids.JOB_DONE, "data"),
        },
        prevent_initial_call=True,
    )
    def watch(active, state, done):
        return watch_job(ctx, active, state, done)

    @app.callback(
        output={
            "done": Output(ids.JOB_DONE, "data", allow_duplicate=True),
            "cancel": Output(ids.CANCEL, "disabled", allow_duplicate=True),
            "box": Output(ids.PROGRESS_BOX, "style", allow_duplicate=True),
            "watch": Output(ids.JOB_WATCH, "disabled", allow_duplicate=True),
        },
        inputs={"tick": Input(ids.JOB_WATCH, "n_intervals"), "request": State(ids.JOB_REQUEST, "data")},
        prevent_initial_call=True,
    )
    def check(tick, request):
        return check_job(ctx, request)


STOPPED = (
    "The computation ended without its results: it was cancelled, or its process stopped "
    "(killed for memory or time, or the server restarted). Press Retry to compute again."
)
CANCELLED = "Cancelled. Press Retry (or change a setting) to compute again."
HIDDEN: dict[str, str] = {"display": "none"}
SHOWN: dict[str, str] = {}


UNCHANGED = {"results": no_update, "status": no_update, "retry": no_update}

DIED = (
    "The computation ended without its results: its process ended unexpectedly (killed, out of "
    "memory, or its server restarted). Press Retry to compute it again."
)
NOT_STARTED = (
    "The computation ended without its results: its process ended before it could start (killed, "
    "out of memory, or its server restarted). Press Retry to compute it again."
)
# seconds a job may take to start (its process to mark itself; forking is slow on a loaded machine)
# before it counts as lost: a job lost before it starts is still answered within 10 s
START_GRACE = 7.0
REQUEUE_SLACK = 15.0  # seconds beyond requeue_after for another worker to take up a job whose worker died
DELIVER_AFTER = 3.0  # seconds after a job's end before the watchdog hands its outcome over itself
WAITING = {"done": no_update, "cancel": no_update, "box": no_update, "watch": no_update}


def check_job(ctx, request, now=None) -> dict:
    """The watchdog, on each tick while a job runs (its own requests, to whichever worker
    answers): the page must never wait for a job that is gone. A job whose process ended
    without its outcome (killed, out of memory, its worker gone), or that never started,
    gets a job end saying so (``finish_job`` then shows it with Retry); a job that ended
    while the page's polling was lost with its worker gets its own outcome handed over.
    Returns the job-end record, and the Cancel, progress and ticking outputs (``WAITING``:
    nothing to do yet)."""
    if not page_nonce(request):
        return {**WAITING, "watch": True}
    now = time.time() if now is None else now
    status, record = jobs.job_status(ctx.store, job_token(request))
    if status == "running":
        return dict(WAITING)
    stop = {"cancel": True, "box": {"visibility": "hidden"}, "watch": True}
    if status == "cancelled":
        return {**stop, "done": no_update}
    if status == "done":
        if now - float(record.get("t") or 0) < DELIVER_AFTER:  # Dash's own polling hands it over
            return dict(WAITING)
        return {**stop, "done": record["outcome"]}
    if status == "unknown":  # not started yet: lost once that lasts START_GRACE from the first look
        if now - jobs.first_look(ctx.store, job_token(request), now) < START_GRACE:
            return dict(WAITING)
        message = NOT_STARTED
    else:
        if ctx.config.celery_broker and now - jobs.first_look(ctx.store, "died:" + job_token(request), now) < (
            ctx.config.requeue_after + REQUEUE_SLACK
        ):  # its worker vanished: Celery hands the job to another, which takes up its record
            return dict(WAITING)
        message = DIED
    rid = _final_id(ctx, _trusted(ctx, request.get("state")), request.get("request"))
    log.warning("a job's process ended without its results (%s)", status)
    return {**stop, "done": {"request": rid, "error": message, "nonce": page_nonce(request)}}


def watch_job(ctx, active, state, done) -> dict:
    """Watchdog: when a job stops running, the page must not stay on "Computing…". If the
    state's results are still missing and no job error explains it, the job died (Dash
    reports nothing when a job process is killed); say so, and offer Retry. Returns the
    page's results record, status line and Retry button style (``UNCHANGED``: none)."""
    if active is not False:
        return dict(UNCHANGED)
    if not isinstance(resolve_state(ctx, state, done).request, dict):  # complete, or a job error: finish_job
        return dict(UNCHANGED)
    return {"results": {"error": STOPPED, "state": clean_state(state)}, "status": STOPPED, "retry": SHOWN}


LEFT_OUT = (
    "The computation ended, but some results the page needs are still missing (the cache dropped "
    "them, or they became known only now). Press Retry to compute them."
)


def finish_job(ctx, state, done, request=None) -> dict:
    """After a job: the results if the current state is now complete, its error if it
    failed (with Retry: a time or memory limit may not be hit again on a quieter server);
    nothing while a newer job (for a newer state) is still running. ``request``: the page's
    latest job request; when ``done`` is its end (same nonce) yet results are missing, the
    page waits for no other job, so it says so (with Retry) rather than wait. Returns the
    page's results record, status line and Retry button style (as :func:`watch_job`)."""
    resolved = resolve_state(ctx, state, done)
    if isinstance(resolved.request, dict):
        ours = isinstance(done, dict) and isinstance(request, dict) and request.get("nonce")
        if not ours or done.get("nonce") != request.get("nonce"):  # a newer job is still running
            return dict(UNCHANGED)
        # the page's own job ended, planned otherwise than here (a worker that knew more or less
        # of the cache): its error, or what is missing, with Retry
        message = str(done.get("error") or LEFT_OUT)
        return {"results": {"error": message, "state": clean_state(state)}, "status": message, "retry": SHOWN}
    failed = isinstance(resolved.results, dict) and "error" in resolved.results
    return {"results": resolved.results, "status": resolved.status, "retry": SHOWN if failed else HIDDEN}
