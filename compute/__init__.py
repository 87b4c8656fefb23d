"""Model-agnostic feature importance, organised by the SIPA stages.

Sampling (:mod:`.sampling`), intervention (:mod:`.intervention`), prediction
(:mod:`.prediction`) and aggregation (:mod:`.aggregation`); public entry points below.
"""

from . import findings
from .aggregation import rank_extremes
from .caveats import (
    Dependence,
    LeakageCheck,
    PfiConvergence,
    constant_model_error,
    feature_dependence,
    grouped_against_alone,
    leakage_check,
    pfi_convergence,
)
from .ciu import ciu_from_profiles, contextual_importance, global_contextual_importance, output_range, output_range_of
from .conditional import ConditionalImportance, conditional_importance
from .effects import (
    ale_curve,
    ale_from_profile,
    ice_feature_impact,
    ice_impact,
    marginal_effects,
    pd_importance,
    pd_variance_importance,
)
from .errors import ExplainError, InputError, ModelError, SubgroupError
from .importance import permutation_importance, permutation_rows, pfi_engine
from .interaction import InteractionStrength, interaction_strength
from .performance import (
    Performance,
    PerformanceGap,
    Predictions,
    calibration_curve,
    confusion_accuracy,
    confusion_matrix,
    model_performance,
    performance_gap,
    predict_rows,
)
from .profile import feature_profile, feature_profiles
from .regional import RegionalSplit, SubgroupSuggestions, suggest_subgroups
from .results import Extremes, FeatureProfile, PermutationImportance, PermutationPairs
from .separation import FeatureDifference, compare_features, ranking_ties, tied_with
from .shapley import (
    ShapleyCoalitions,
    ShapleyContributions,
    ShapleyImportance,
    compare_shapley_importance,
    shapley_coalitions,
    shapley_contributions,
    shapley_importance,
)
from .skill import ModelComparison, Skill, compare_models, model_skill
from .subgroup import format_condition, parse_subgroup
from .summary import ProfileSummary
from .trees import BATCHED_PREDICT, TREE_WALK
from .whatif import WhatIf, apply_edits, what_if, what_if_grids

__all__ = [
    "FeatureDifference",
    "compare_features",
    "ranking_ties",
    "tied_with",
    "ModelComparison",
    "Skill",
    "compare_models",
    "model_skill",
    "performance_gap",
    "PerformanceGap",
    "findings",
    "interaction_strength",
    "InteractionStrength",
    "conditional_importance",
    "ConditionalImportance",
    "suggest_subgroups",
    "pfi_convergence",
    "leakage_check",
    "feature_dependence",
    "grouped_against_alone",
    "constant_model_error",
    "SubgroupSuggestions",
    "RegionalSplit",
    "PfiConvergence",
    "LeakageCheck",
    "Dependence",
    "ExplainError",
    "Extremes",
    "FeatureProfile",
    "InputError",
    "ModelError",
    "Performance",
    "PermutationImportance",
    "PermutationPairs",
    "ShapleyCoalitions",
    "shapley_coalitions",
    "Predictions",
    "ProfileSummary",
    "ShapleyContributions",
    "ShapleyImportance",
    "SubgroupError",
    "WhatIf",
    "compare_shapley_importance",
    "ale_curve",
    "apply_edits",
    "ale_from_profile",
    "calibration_curve",
    "ciu_from_profiles",
    "confusion_accuracy",
    "confusion_matrix",
    "contextual_importance",
    "feature_profile",
    "feature_profiles",
    "format_condition",
    "global_contextual_importance",
    "ice_feature_impact",
    "ice_impact",
    "marginal_effects",
    "model_performance",
    "output_range",
    "output_range_of",
    "pd_importance",
    "pd_variance_importance",
    "parse_subgroup",
    "permutation_importance",
    "permutation_rows",
    "BATCHED_PREDICT",
    "TREE_WALK",
    "pfi_engine",
    "predict_rows",
    "rank_extremes",
    "shapley_contributions",
    "shapley_importance",
    "what_if",
    "what_if_grids",
]
