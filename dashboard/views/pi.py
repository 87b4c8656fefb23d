"""PI curves of all rows, the subgroup and its complement (Fig. 4), with the feature's
distribution (Fig. 6) and the global PFI."""

from __future__ import annotations

from .. import components, figures, ids
from .base import PROFILES, View, empty
from .engine_note import engine_note


def render(ctx, inp) -> dict:
    prof, summary = inp.profile, inp.summary
    if prof is None or summary is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    groups = None
    if inp.profile_mask is not None:
        sub = inp.state["subgroup"]
        groups = {sub: inp.profile_mask, f"not ({sub})": ~inp.profile_mask}
    global_pfi = float(summary.conditional_pfi().loc[inp.feature, "all"])
    fig = figures.pi_figure(
        prof, groups, global_pfi=global_pfi, x_all=inp.data[inp.feature].to_numpy(), label=inp.label(prof.feature)
    )
    return {"figure": figures.add_subtitle(fig, engine_note(prof, short=True))}


def library(inp) -> dict:
    """PI curves of all explained rows and of each group (``FeatureProfile.pi`` of its
    subset), and the global PFI line (``ProfileSummary.conditional_pfi``)."""
    prof, summary = inp.profile, inp.summary
    if prof is None or summary is None or not prof.has_target:
        return {}
    found = {"PI (all)": prof.pi, "global PFI": float(summary.conditional_pfi().loc[inp.feature, "all"])}
    if inp.profile_mask is not None:
        for name, mask in (("subgroup", inp.profile_mask), ("rest", ~inp.profile_mask)):
            if mask.any():
                found[f"PI ({name})"] = prof.subset(mask).pi
    return found


VIEW = View(
    name="pi",
    section="feature",
    order=40,
    title="PI curves",
    question="Where in its range does the feature matter to the model's accuracy, overall and in the subgroup?",
    method=(
        "Partial importance (PI) curves, Casalicchio et al. (2018), Fig. 4 and 6: the mean change in error "
        "when the feature is set to x, for all rows and each group; the dashed line is the curves' mean over "
        "the rows' values (Eq. 9: the PFI read from the curves, every row set to each grid value; the PFI bars "
        "shuffle the feature a few times instead, so they differ by the permutations' noise), the top the "
        "feature's distribution."
    ),
    outputs={"figure": (ids.PI_GRAPH, "figure")},
    render=render,
    body=lambda: [components.graph(ids.PI_GRAPH, filename="pi")],
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "subgroup"}),
    library=library,
)
