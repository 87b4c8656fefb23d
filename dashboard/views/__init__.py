"""The view registry: one module per view; everything that lists views iterates REGISTRY.

Adding a view (README, "Adding a view"): a compute function if the maths is new, a figure
function in a family module of ``dashboard/figures/``, a module here defining ``VIEW = View(...)`` (found by
itself; ``order`` places it on the page), its component ids, and tests. The layout, the job
planner, the callbacks, the HTML report and the CSV exports pick it up from the registry.
"""

from __future__ import annotations

import functools
import json
import os
import pkgutil
from importlib import import_module

import compute

from .. import planning, tasks, view_render
from .. import resolve as resolving
from ..planning import TaskSpec
from ..resolve import Resolved
from ..view_render import built_in, drawn, input_id, placeholder
from .base import SECTIONS, Inputs, Lru, Select, View, check_reads, waiting

EXTRA_VIEWS = "WIP_EXTRA_VIEWS"  # environment: more view modules, comma-separated (outside this package)


def _discover() -> tuple[View, ...]:
    """Every module of this package that defines ``VIEW``, and the modules the operator names
    in the ``WIP_EXTRA_VIEWS`` environment variable (importable names, comma-separated: views
    kept outside this package), in the views' page order."""
    found = []
    names = [f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__)]
    extra = [name.strip() for name in os.environ.get(EXTRA_VIEWS, "").split(",") if name.strip()]
    for name in names + extra:
        module = import_module(name)
        if isinstance(getattr(module, "VIEW", None), View):
            found.append(module.VIEW)
        elif name in extra:
            raise RuntimeError(f"{EXTRA_VIEWS} names {name!r}, which defines no VIEW = View(...)")
    names = [v.name for v in found]
    if len(set(names)) != len(names):
        raise RuntimeError(f"two views share a name: {sorted(names)}")
    keys = [key for key, _, _ in SECTIONS]
    unknown = [v.name for v in found if v.section not in keys]
    if unknown:
        raise RuntimeError(f"views in no known section ({keys}): {unknown}")
    check_reads(found)  # a field read by name that no registered view declares fails here, not on a request
    return tuple(sorted(found, key=lambda v: (keys.index(v.section), (v.order, v.name))))


REGISTRY: tuple[View, ...] = _discover()
BY_NAME: dict[str, View] = {v.name: v for v in REGISTRY}


def needed_tasks() -> frozenset:
    """The built-in task kinds the registered views read (``View.needs``)."""
    return frozenset().union(*(v.needs for v in REGISTRY))


@functools.cache
def needed_specs() -> tuple[TaskSpec, ...]:
    """The tasks the job planner plans: the built-in ones the registered views read (in
    their order), then the views' own."""
    needed = needed_tasks()
    for kind in needed:
        built_in(kind)  # a typo in a view's needs fails at start, not on a visitor's request
    return tuple(spec for spec in tasks.BUILT_IN if spec.kind in needed) + task_specs()


def selects() -> tuple[Select, ...]:
    """Every view's clicks that select a feature or an observation (the controller listens)."""
    found = tuple(s for v in REGISTRY for s in v.selects)
    if len({s.id for s in found}) != len(found):
        raise RuntimeError(f"two selections share a component: {sorted(s.id for s in found)}")
    return found


def task_specs() -> tuple[TaskSpec, ...]:
    """The tasks views declare themselves (``View(tasks=...)``), planned with the built-in ones."""
    return tuple(spec for v in REGISTRY for spec in v.tasks)


def plan_state(ctx, ws, state: dict) -> dict:
    """Cache keys and tasks of a (cleaned, normalised) state, for the registered views
    (:func:`dashboard.planning.plan_state`)."""
    return planning.plan_state(ctx, ws, state, specs=needed_specs())


def resolve(ctx, raw) -> Resolved | None:
    """A state from the browser cleaned, normalised and planned for the registered views,
    once per request (:func:`dashboard.resolve.resolve`); everything below takes it."""
    return resolving.resolve(ctx, raw, specs=needed_specs())


def settle(ctx, resolved: Resolved) -> Resolved:
    """A resolution planned again once the curves name its default observation."""
    return resolving.settle(ctx, resolved, specs=needed_specs())


_INPUTS = Lru(8)  # Inputs per results record: every view of one update reads the same


def load_inputs(ctx, results) -> Inputs | None:
    """:class:`Inputs` of a results record, or None when it is not ready. Only the state is
    read from the record ('pending' and 'keys' are the browser's word), resolved as any
    request's (:func:`resolve`): nothing the browser sends back is trusted. Memoised per
    process for the views rendering the same record; a missing result is read again on
    every request until it is found."""
    if not isinstance(results, dict) or "keys" not in results or not isinstance(results.get("state"), dict):
        return None
    try:  # one server process may hold several apps (tests): their store and settings differ
        tag = (str(ctx.store.root), ctx.config, json.dumps(results["state"], sort_keys=True, default=str))
    except (TypeError, ValueError):
        return None
    # an Inputs still without its observation (the curves not cached yet) is not kept: the
    # next request finds the default one
    return _INPUTS.get(tag, lambda: _make_inputs(ctx, results["state"]), keep=_settled)


def _settled(inp: Inputs) -> bool:
    return inp.state.get("obs") is not None


def _make_inputs(ctx, raw_state) -> Inputs | None:
    r = resolve(ctx, raw_state)
    return None if r is None else Inputs(ctx, r.shown, r.ws, r.data, r.mask, r.keys)


def signatures(store, state: dict, keys: dict) -> dict[str, str]:
    """Per view, a digest of what its outputs depend on; equal digests mean equal outputs, so
    the page skips drawing that view again (:func:`dashboard.view_render.signatures`)."""
    return view_render.signatures(REGISTRY, store, state, keys)


def render(ctx, view: View | str, results, inp: Inputs | None = None, controls: dict | None = None) -> dict:
    """The named outputs of one view for a results record; never raises for a visitor.

    A view with ``controls`` also gets their values (its defaults where ``controls`` lacks
    one): they come from the browser, so the view checks them, and they only change how
    cached results are shown, never what is computed."""
    view = BY_NAME[view] if isinstance(view, str) else view
    inp = inp or load_inputs(ctx, results)
    return placeholder(view, waiting(results)) if inp is None else drawn(ctx, view, inp, controls)


def render_all(ctx, results) -> dict[str, dict]:
    inp = load_inputs(ctx, results)
    return {v.name: render(ctx, v, results, inp) for v in REGISTRY}


def panels(panel, section: str | None = None) -> list:
    """One panel per view (of one section), in page order (``panel`` is ``dashboard.components.panel``)."""
    return view_render.panels(REGISTRY, panel, section)


def exports() -> dict:
    """Export button id -> function(ctx, Inputs) returning a dcc download."""
    found = {}
    for view in REGISTRY:
        found.update(view.exports)
    return found


def export(ctx, button: str, results):
    """The download of one export button for a results record (None when not ready)."""
    fn = exports().get(button)
    inp = load_inputs(ctx, results)
    if fn is None or inp is None:
        return None
    try:
        return fn(ctx, inp)
    except compute.ExplainError:  # its results could not be computed for these rows: the panel says why
        return None


__all__ = [
    "BY_NAME",
    "REGISTRY",
    "SECTIONS",
    "Inputs",
    "View",
    "export",
    "exports",
    "input_id",
    "signatures",
    "load_inputs",
    "needed_specs",
    "needed_tasks",
    "task_specs",
    "panels",
    "render",
    "render_all",
    "placeholder",
]
