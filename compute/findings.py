"""What we found, in plain sentences: each a function of computed results that says what
the numbers say (with their uncertainty) or nothing when there is nothing to say.

Every function returns a :class:`Finding` or None. ``topic`` names the kind of result it
reads ("importance", "subgroups", "interactions", "dependence", "leak"), so a page can link
the sentence to the view that shows it; ``numbers`` holds the numbers the sentence states.
Numbers are written to 3 significant digits, whole numbers from 100 up (thousands
separated)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .caveats import LeakageCheck
from .conditional import ConditionalImportance
from .interaction import InteractionStrength
from .performance import PerformanceGap
from .regional import SubgroupSuggestions
from .results import PermutationImportance
from .separation import tied_with
from .skill import ModelComparison, Skill

__all__ = [
    "Finding",
    "verdict",
    "acting_together",
    "inflated_by_dependence",
    "leak_warning",
    "reliance",
    "where_importance_comes_from",
    "worse_where",
]


@dataclass(frozen=True)
class Finding:
    """One sentence and the numbers it states."""

    topic: str
    text: str
    numbers: dict = field(default_factory=dict)


def possessive(name) -> str:
    """``name``'s, or ``name``' for a name ending in s ("flavanoids' importance")."""
    text = str(name)
    return f"{text}'" if text.endswith(("s", "S")) else f"{text}'s"


def number(value: float) -> str:
    """3 significant digits (a whole number from 100 up: "1,094", not "1,090"), thousands
    separated, no exponent for everyday magnitudes."""
    value = float(value)
    if value == 0 or not np.isfinite(value):
        return "0" if value == 0 else str(value)
    if 100 <= abs(value) < 1e6:
        return f"{value:,.0f}"
    rounded = float(f"{value:.3g}")
    if abs(rounded) >= 1e6 or abs(rounded) < 1e-4:
        return f"{rounded:.3g}"
    decimals = max(0, 2 - int(np.floor(np.log10(abs(rounded)))))
    return f"{rounded:,.{decimals}f}"


def _judged(skill: Skill) -> str:
    """How a model compares with the constant, in words, from the skill's interval."""
    if skill.high < 0:
        return "worse than"
    if skill.low <= 0:
        return "not clearly better than"
    if skill.skill < 0.1:
        return "barely better than"
    return "better than" if skill.skill < 0.5 else "much better than"


def _constant(skill: Skill) -> str:
    """What the constant prediction does, in words."""
    if isinstance(skill.constant, dict):  # class shares
        label, share = max(skill.constant.items(), key=lambda item: item[1])
        return f"giving every row the class shares ({share:.1%} '{label}')"
    if skill.loss == "zero_one":
        return f"always answering '{skill.constant}'"
    what = "mean" if skill.loss == "squared_error" else "median"
    return f"always predicting the {what} ({number(float(skill.constant))})"  # type: ignore[arg-type]


def verdict(skills, comparison: ModelComparison | None, *, loss: str, rows_note: str = "") -> list[Finding]:
    """How good the models are, first: the best model (or the only one) against the best
    constant prediction under PFI's loss (``compute.model_skill``: skill = 1 - loss /
    constant's loss with its interval), and with several models which is best and whether
    the rows tell it apart from the runner-up (``compute.compare_models``, paired on the
    same rows). ``skills``: {model: Skill}; ``rows_note``: a clause on what the rows are."""
    if not skills:
        return []
    best = comparison.best if comparison is not None else next(iter(skills))
    skill = skills[best]
    level = f"{skill.level:.0%}"
    interval = f"skill {number(skill.skill)}, {level} interval {number(skill.low)} to {number(skill.high)}"
    scale = "1 is perfect, 0 no better than the constant"
    if skill.accuracy is not None and skill.baseline_accuracy is not None:
        head = (
            f"{best} is {_judged(skill)} always answering '{skill.majority}': accuracy {skill.accuracy:.3f} against "
            f"{skill.baseline_accuracy:.3f}"
        )
        if skill.loss == "zero_one":
            text = f"{head} ({interval}; {scale})"
        else:
            text = (
                f"{head}; its {loss} (the loss PFI uses) is {number(skill.model_error)} against "
                f"{number(skill.baseline_error)} for {_constant(skill)} ({interval}; {scale})"
            )
    else:
        text = (
            f"{best} is {_judged(skill)} {_constant(skill)}: its {loss} is {number(skill.model_error)} against "
            f"{number(skill.baseline_error)} ({interval}; {scale})"
        )
    numbers = {"model": best, "skill": skill.skill, "low": skill.low, "high": skill.high}
    out = [Finding("performance", f"{text}{rows_note}.", numbers)]
    if comparison is not None:
        others = "; ".join(f"{m} {number(e)}" for m, e in list(comparison.errors.items())[1:])
        diff = (
            f"difference {number(comparison.difference)}, {level} interval {number(comparison.low)} to "
            f"{number(comparison.high)}, paired on the same {comparison.n_rows:,} rows"
        )
        tell = (
            f"its lead over {comparison.runner_up} is more than its uncertainty ({diff})"
            if comparison.clear
            else f"but these rows cannot tell it from {comparison.runner_up} ({diff})"
        )
        text = (
            f"Of the {len(comparison.errors)} models, {best} does best ({loss} {number(comparison.errors[best])}; "
            f"{others}), {tell}. The sentences below describe {best}."
        )
        out.append(Finding("performance", text, {"best": best, "errors": dict(comparison.errors)}))
    return out


def reliance(pfi: PermutationImportance, *, model: str, loss: str) -> Finding | None:
    """Which features the model's performance relies on most, their share of the total
    positive importance, and which the data cannot tell apart from the first
    (:func:`compute.separation.tied_with`, the one rule the ranking's verdict uses too). Each
    "±" is the result's :attr:`~compute.PermutationImportance.uncertainty`, the standard error
    the bars draw. None when no feature's shuffle raises the error."""
    importance = pfi.importance
    positive = importance.clip(lower=0)
    total = float(positive.sum())
    if pfi.kind != "difference" or total <= 0:
        return None
    error = pfi.uncertainty.fillna(0.0)
    order = importance.sort_values(ascending=False, kind="stable").index
    top = order[0]
    tied = tied_with(pfi, top)
    shown = [top, *tied]
    share = float(positive[shown].sum() / total)
    parts = ", ".join(f"{f} ({number(importance[f])} ± {number(error[f])})" for f in shown)
    numbers = {"features": [str(f) for f in shown], "share": share, "importance": importance[shown].to_dict()}
    if tied:
        text = (
            f"{possessive(model)} performance relies most on {_names(shown)}, which these data cannot tell apart: "
            f"shuffling one raises the {loss} by {parts}; together {share:.0%} of all features' importance."
        )
        return Finding("importance", text, numbers)
    runner = order[1] if len(order) > 1 and importance[order[1]] > 0 else None
    nxt = "" if runner is None else f"; next is {runner} ({number(importance[runner])} ± {number(error[runner])})"
    text = (
        f"{possessive(model)} performance relies most on {top}: shuffling it raises the {loss} by "
        f"{number(importance[top])} ± {number(error[top])}, {share:.0%} of all features' importance{nxt}."
    )
    return Finding("importance", text, numbers)


def where_importance_comes_from(found: SubgroupSuggestions, *, min_share: float = 0.1) -> Finding | None:
    """The split across which a feature's importance differs most, when it explains at
    least ``min_share`` of how the importance varies from row to row."""
    if not found.splits or found.splits[0].share < min_share:
        return None
    split = found.splits[0]
    big, small = (
        (split.left, split.right) if split.importance_left >= split.importance_right else (split.right, split.left)
    )
    high, low = max(split.importance_left, split.importance_right), min(split.importance_left, split.importance_right)
    text = (
        f"{possessive(found.feature)} importance comes from rows where {big}: read from its ICI curves "
        f"(every row set to each value of its grid, not the bars' few shuffles), it is {number(high)} there, against "
        f"{number(low)} where {small} (this split explains {split.share:.0%} of how its importance varies "
        "from row to row)."
    )
    return Finding("subgroups", text, {"feature": str(found.feature), "high": high, "low": low, "share": split.share})


def acting_together(found: InteractionStrength, *, min_h2: float = 0.05) -> Finding | None:
    """The strongest pair's interaction when at least ``min_h2`` of its joint effect is
    interaction (pairs are listed strongest first)."""
    if found.pairs.empty or found.pairs["h2"].iloc[0] < min_h2:
        return None
    first = found.pairs.iloc[0]
    a, b, h2 = first["feature_1"], first["feature_2"], float(first["h2"])
    others = found.pairs.iloc[1:]
    also = others[others["h2"] >= min_h2]
    more = (
        ""
        if also.empty
        else f"; also {also.iloc[0]['feature_1']} and {also.iloc[0]['feature_2']} ({also.iloc[0]['h2']:.0%})"
    )
    text = (
        f"{a} and {b} act together: {h2:.0%} of their joint effect on the prediction is interaction "
        f"(Friedman's H² = {number(h2)}), so {possessive(a)} effect depends on {b}{more}."
    )
    return Finding("interactions", text, {"pair": [str(a), str(b)], "h2": h2})


def inflated_by_dependence(
    cs: ConditionalImportance, marginal: PermutationImportance, *, min_drop: float = 0.25, prefer=None
) -> Finding | None:
    """The feature whose importance falls most once the features it depends on are known
    (conditional against marginal PFI), when the fall is beyond two standard errors and at
    least ``min_drop`` of its marginal importance; ``prefer`` (a chosen feature) when its
    fall is at least half the largest. ``numbers``: the feature, both PFIs, the share of
    the marginal PFI that fell, and the columns it was conditioned on."""
    frame = pd.DataFrame(
        {
            "marginal": marginal.importance,
            "conditional": cs.importance,
            "error": np.hypot(marginal.std_error.fillna(0), cs.std_error.fillna(0)),
        }
    ).dropna(subset=["marginal", "conditional"])
    drop = frame["marginal"] - frame["conditional"]
    real = drop[(drop > 2 * frame["error"]) & (frame["marginal"] > 0) & (drop >= min_drop * frame["marginal"])]
    if real.empty:
        return None
    name = prefer if prefer in real.index and real[prefer] >= 0.5 * real.max() else real.idxmax()
    row = frame.loc[name]
    known = ", ".join(map(str, cs.conditioned_on.get(name, [])[:2])) or "the other features"
    share = float(real[name] / row["marginal"])
    text = (
        f"{possessive(name)} importance is inflated by dependence: {number(row['marginal'])} when shuffled "
        "among all rows, "
        f"{number(row['conditional'])} once {known} {'is' if ',' not in known else 'are'} known ({share:.0%} of it "
        "came from shuffled rows that never occur)."
    )
    numbers = {
        "feature": name,
        "marginal": row["marginal"],
        "conditional": row["conditional"],
        "share": share,
        "known": known,
    }
    return Finding("dependence", text, numbers)


def worse_where(gap: PerformanceGap, *, subgroup: str, loss: str) -> Finding | None:
    """Whether the model does worse (or better) on the subgroup than on the rest, when the
    95 % interval of the difference excludes zero."""
    if not gap.clear:
        return None
    low, high = gap.interval
    side = "worse" if gap.difference > 0 else "better"
    text = (
        f"The model does {side} where {subgroup}: its {loss} there is {number(gap.inside)} against "
        f"{number(gap.outside)} on the other rows (difference {number(gap.difference)}, 95 % interval "
        f"{number(low)} to {number(high)}; {gap.n_inside:,} and {gap.n_outside:,} rows)."
    )
    return Finding("performance", text, {"inside": gap.inside, "outside": gap.outside, "difference": gap.difference})


def leak_warning(check: LeakageCheck) -> Finding | None:
    """A near-perfect model whose importance sits on one or two features (seed 001)."""
    if not check.flagged:
        return None
    text = (
        f"Worth a look before trusting the model: it is near-perfect (skill {number(check.skill)}; 1 is perfect) and "
        f"{_names(check.carriers)} carr{'ies' if len(check.carriers) == 1 else 'y'} {check.carried:.0%} of its "
        "importance: could that be known only with or after the outcome (a leak)?"
    )
    return Finding("leak", text, {"skill": check.skill, "carriers": [str(c) for c in check.carriers]})


def _names(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
