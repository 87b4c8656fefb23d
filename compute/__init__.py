"""Model-agnostic feature importance, organised by the SIPA stages.

Sampling (:mod:`.sampling`), intervention (:mod:`.intervention`), prediction
(:mod:`.prediction`) and aggregation (:mod:`.aggregation`); public entry points below.
"""

from .errors import ExplainError, InputError, ModelError, SubgroupError
from .importance import permutation_importance
from .profile import feature_profile, feature_profiles
from .results import Extremes, FeatureProfile
from .shapley import ShapleyImportance, compare_shapley_importance, shapley_importance
from .subgroup import format_condition, parse_subgroup

__all__ = [
    "ExplainError",
    "Extremes",
    "FeatureProfile",
    "InputError",
    "ModelError",
    "ShapleyImportance",
    "SubgroupError",
    "compare_shapley_importance",
    "feature_profile",
    "feature_profiles",
    "format_condition",
    "parse_subgroup",
    "permutation_importance",
    "shapley_importance",
]
