"""Which engine computed a view's numbers, in one sentence for its notes (issue 42).

The block methods record the engine that ran: "exact tree walk" (the model's own trees,
walked once per row: the same numbers as its predict) or "batched predict" (every changed row
predicted), and why the walk was not used. :func:`engine_note` is the one place that words it
for a reader; every view that shows such a result calls it. A result cached by an older version
records no engine: nothing is said of it. Not a view (defines no ``VIEW``): the registry skips it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

WALK = "exact tree walk"
PREDICT = "batched predict"
ASKED = "engine='predict' was asked for"  # not a reason worth a reader's time: nothing fell back


def engine_of(result: Any) -> tuple[str, str | None] | None:
    """``(engine, reason)`` a result records, the reason None when the walk ran or the batched
    predict was asked for; None when the result records no engine. Reads a
    ``PermutationImportance`` or ``InteractionStrength`` (``engine``, ``engine_reason``), a
    ``ConditionalImportance`` (its ``conditional``) and a ``FeatureProfile``
    (``params["engine"]``, ``params["engine_reason"]``)."""
    inner = getattr(result, "conditional", None)
    if inner is not None and not callable(inner):  # a ConditionalImportance: its conditional PFI
        result = inner
    params = getattr(result, "params", None)
    if isinstance(params, Mapping) and "engine" in params:
        engine, reason = params.get("engine"), params.get("engine_reason")
    else:
        engine, reason = getattr(result, "engine", None), getattr(result, "engine_reason", None)
    if engine not in (WALK, PREDICT):
        return None
    shown = reason.strip().rstrip(".") if engine == PREDICT and isinstance(reason, str) else ""
    return engine, (shown if shown and shown != ASKED else None)


def _words(engine: str, reason: str | None) -> str:
    """One model's engine in a few words: "exact tree walk", "batched predict (<reason>)"."""
    return f"{engine} ({reason})" if reason else engine


def _sentence(engine: str, reason: str | None, several: bool) -> str:
    if engine == WALK:
        whose, its = ("the models'", "their") if several else ("the model's", "its")
        return (
            f"Computed exactly from {whose} own trees (exact tree walk: the same numbers as {its} predictions, faster)."
        )
    why = f" The exact tree walk was not used: {reason}." if reason else ""
    return f"Computed by predicting every changed row (batched predict).{why}"


def engine_note(results: Any, *, short: bool = False) -> str:
    """The engine that computed ``results`` (one result, or ``{model name: result}``) for a
    stakeholder: one sentence, or with ``short`` a few words for a figure's subtitle. Said
    once when every model took the same engine, model by model when they differ (or when some
    record none: those are not named); "" when none records its engine."""
    items = list(results.items()) if isinstance(results, Mapping) else [("", results)]
    found = [(str(name), engine_of(result)) for name, result in items if result is not None]
    known = [(name, engine) for name, engine in found if engine is not None]
    if not known:
        return ""
    if len(known) == len(found) and len({engine for _, engine in known}) == 1:
        engine, reason = known[0][1]
        return f"computed by {_words(engine, reason)}" if short else _sentence(engine, reason, len(known) > 1)
    listed = "; ".join(f"{name}: {_words(*engine)}" for name, engine in known)
    return f"computed by {listed}" if short else f"How each model was computed: {listed}."


def joined(text: str, note: str) -> str:
    """``text`` and ``note`` as one paragraph (either may be empty)."""
    return f"{text} {note}".strip() if note else text
