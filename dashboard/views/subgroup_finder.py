"""Subgroups found for you: where the chosen feature's importance differs most.

``compute.suggest_subgroups`` grows a shallow tree on the chosen feature's cached ICI curves
against the other features (no model call) and lists its splits, largest share of the ICI
variation first. Each side of a split is a button that applies its condition as the subgroup
(a clientside callback puts the condition in a store the controller reads; the controller
parses it like text typed into the subgroup box).
"""

from __future__ import annotations

from dash import dcc, html

import compute
from compute.findings import possessive

from .. import figures, ids
from .base import PROFILES, Lru, View

LIST = "suggestions-list"
INFO = "suggestions-info"
SHOWN = 5  # suggestions listed
WEAK = 0.10  # below this share no split is called an interaction
# the tree grown on a profile's curves, per process: a profile never changes under its cache key
# (a content hash), and the rows are named by the data's checksum, the subgroup and the exclusions
_SUGGESTED = Lru(16)


def suggestions(inp, prof=None) -> compute.SubgroupSuggestions | None:
    """The splits on other features that explain the feature's ICI curves best (the chosen
    feature's, or ``prof``'s: a feature's cached profile, ``inp.profile_of``), on the rows
    looked at (``compute.suggest_subgroups``); None with no other feature. Kept per process
    under the profile's cache key and the rows (the overview's findings read the top
    feature's too)."""
    chosen = prof is None
    prof = inp.profile if chosen else prof
    excluded = [str(e) for e in inp.state.get("exclude") or ()]
    others = [f for f in inp.ws.features if f != prof.feature]
    if not others:
        return None

    def grow() -> compute.SubgroupSuggestions:
        if chosen:
            mask = inp.profile_mask
        else:
            mask = None if inp.mask is None else inp.mask.reindex(prof.rows).fillna(False).to_numpy(bool)
        if excluded:
            keep = ~prof.rows.astype(str).isin(excluded)
            mask = keep if mask is None else mask & keep
        return compute.suggest_subgroups(prof, inp.data, features=others, mask=mask, condition=inp.state["subgroup"])

    key = inp.keys.get("profiles", {}).get(prof.feature)
    if key is None:
        return grow()
    rows = (inp.ws.id, inp.ws.data_sha, inp.state["subgroup"], tuple(excluded))
    return _SUGGESTED.get((key, rows, tuple(map(str, others))), grow)


def shown(found) -> list:
    """The splits listed: splits explaining under 1 % say nothing a person can use, listed
    only when nothing does more."""
    useful = [s for s in found.splits if s.share >= 0.01] or list(found.splits[:1])
    return useful[:SHOWN]


def render(ctx, inp) -> dict:
    prof = inp.profile
    if prof is None:
        return {"list": [], "info": "Waiting for the ICE/ICI pass…"}
    if not prof.has_target:
        return {"list": [], "info": "Suggestions need the target: this data has no target column."}
    found = suggestions(inp)
    if found is None:
        return {"list": [], "info": "The model has one feature: there is nothing else to split on."}
    feature = inp.label(inp.feature)  # as people read it; the conditions keep the column names
    scope = f"the subgroup's {found.n_rows:,} rows" if inp.state["subgroup"] else f"{found.n_rows:,} rows"
    if not found.splits:
        return {
            "list": [],
            "info": f"{possessive(feature)} ICI curves are flat on {scope}: the model's error does not depend on "
            f"{feature}, so no subgroup changes its importance.",
        }
    cards = [_card(split, feature, inp.label) for split in shown(found)]
    best = found.splits[0]
    if best.share < WEAK:
        info = (
            f"On {scope}, no split on another feature explains more than {WEAK:.0%} of how "
            f"{possessive(feature)} ICI curves vary (best: {best.share:.0%}): {possessive(feature)} importance is "
            "much the same in every subgroup tried, so no strong interaction was found. The best splits are "
            "listed anyway."
        )
    else:
        info = (
            f"On {scope}, {possessive(feature)} importance differs most across {best.left_rule} and {best.right_rule}: "
            f"{figures.value_text(best.importance_left)} vs {figures.value_text(best.importance_right)}, read from "
            "its ICI curves (every row set to each grid value; the PFI bars shuffle it a few times instead, so "
            "their all-rows value differs by the permutations' noise). Click a side to apply it as the subgroup."
        )
    return {"list": cards, "info": info}


def _card(split: compute.RegionalSplit, feature, label=str) -> html.Div:
    def side(condition: str, n: int, pfi: float) -> html.Div:
        return html.Div(
            [
                html.Button(condition, id={"type": ids.SUGGESTED, "condition": condition}, className="button small"),
                html.Span(
                    f" importance of {feature} from its curves {figures.value_text(pfi)} ({n:,} rows)", className="help"
                ),
            ],
            className="suggestion-side",
        )

    where = f" (within {split.node})" if split.node else ""
    return html.Div(
        [
            html.Div(
                [
                    f"Split on {label(split.column)}{where}: explains ",
                    html.Span(f"{split.share:.0%}" if split.share >= 0.005 else "under 1%", className="share"),
                    f" of the variation of {possessive(feature)} ICI curves",
                ],
                className="suggestion-head",
            ),
            side(split.left, split.n_left, split.importance_left),
            side(split.right, split.n_right, split.importance_right),
        ],
        className="suggestion",
    )


def report(out: dict) -> list[str]:
    """The suggestions as a list in the HTML report (buttons become plain text)."""
    import html as html_lib

    items = []
    for card in out.get("list") or []:
        head = "".join(c if isinstance(c, str) else str(c.children) for c in card.children[0].children)
        sides = [f"{side.children[0].children}: {side.children[1].children.strip()}" for side in card.children[1:]]
        items.append(f"<li>{html_lib.escape(head)}<br>{'<br>'.join(html_lib.escape(s) for s in sides)}</li>")
    return [f"<ul>{''.join(items)}</ul>"] if items else []


def library(inp) -> dict:
    """Each listed split's PFI on either side (``compute.suggest_subgroups``), as its card
    writes them."""
    prof = inp.profile
    if prof is None or not prof.has_target:
        return {}
    found = suggestions(inp)
    values: dict = {}
    for k, split in enumerate(shown(found) if found is not None else []):
        values[f"split {k + 1}: PFI {split.left_rule}"] = split.importance_left
        values[f"split {k + 1}: PFI {split.right_rule}"] = split.importance_right
    return values


VIEW = View(
    name="subgroup_finder",
    section="subgroups",
    order=10,
    title="Subgroups found for you",
    question="Where does the chosen feature's importance differ most? Click a subgroup to apply it everywhere.",
    method=(
        "A shallow regression tree (depth <= 3, leaves >= 5 % of the rows) on the chosen feature's ICI curves "
        "(Casalicchio et al. 2018) against the other features, each split scored by the share of the curves' "
        "weighted sum of squares it explains, as the regional-effect trees of Herbinger, Bischl & Casalicchio "
        "(REPID, 2022; GADGET, 2023) do on ICE curves. Each side's importance is its mean ICI integral "
        "(Eq. 9). From the cached curves: no model call."
    ),
    outputs={"list": (LIST, "children"), "info": (INFO, "children")},
    placeholder=lambda message: {"list": [], "info": message},
    render=render,
    report=report,
    body=lambda: [
        html.Div(id=INFO, className="help"),
        html.Div(id=LIST, className="suggestions"),
        dcc.Store(id=ids.SUGGESTED_PICK),
    ],
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude"}),
    library=library,
)
