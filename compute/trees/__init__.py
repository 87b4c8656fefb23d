"""An exact tree engine for the block methods (issue 42): ICE, PD, ICI, PI and PFI of a
tree model from one walk per row and tree with the intervened feature left free, instead
of a model call per intervened row.

It is exact recomputation of the model's own prediction function (:mod:`.read` names the
arithmetic it reproduces), not an approximation, and changes no formula: the curves are
still ICE (Goldstein et al. 2015) and PD (Friedman 2001, Eq. 2 of Casalicchio et al. 2018),
PFI Eq. (7)-(8) of Casalicchio, Molnar & Bischl (2018). scikit-learn's
``partial_dependence(method="recursion")`` weights by the training data's node counts;
this engine evaluates the rows given.
"""

from .engine import (
    BATCHED_PREDICT,
    ENGINES,
    TREE_WALK,
    Choice,
    Own,
    check_rows,
    choose_engine,
    for_permutations,
    permuted_losses,
    profile_pass,
)
from .read import Ensemble, Unsupported, read_model
from .walk import curve_sums, lookup_sums, own_in_pass, same_walk

__all__ = [
    "BATCHED_PREDICT",
    "ENGINES",
    "TREE_WALK",
    "Choice",
    "Ensemble",
    "Unsupported",
    "check_rows",
    "choose_engine",
    "curve_sums",
    "for_permutations",
    "lookup_sums",
    "Own",
    "own_in_pass",
    "permuted_losses",
    "profile_pass",
    "read_model",
    "same_walk",
]
