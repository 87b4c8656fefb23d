"""Simulated data sets from the seed papers (generated, never downloaded)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def x3_interaction(n: int, random_state=0) -> tuple[pd.DataFrame, np.ndarray]:
    """The PI/ICI simulation of Casalicchio, Molnar & Bischl (2018), Sec. 6.1:

    Y = X1 + X2 + 10 X1 1[X3 = 0] + 10 X2 1[X3 = 1] + eps,
    X1, X2 ~ N(0, 1) i.i.d., X3 ~ Bernoulli(0.5), eps ~ N(0, 0.5) (read as variance 0.5).

    Globally X1 and X2 are equally important; on X3 = 0 only X1 matters, on X3 = 1 only X2.
    """
    rng = np.random.default_rng(random_state)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    x3 = rng.binomial(1, 0.5, size=n)
    y = x1 + x2 + 10 * x1 * (x3 == 0) + 10 * x2 * (x3 == 1) + rng.normal(scale=np.sqrt(0.5), size=n)
    return pd.DataFrame({"X1": x1, "X2": x2, "X3": x3}), y


def x1x2_interaction(n: int, random_state=0) -> tuple[pd.DataFrame, np.ndarray]:
    """The SFIMP simulation of Casalicchio et al. (2018), Sec. 6.1 (Fig. 5):

    Y = X1 + X2 + X3 + X1 X2 + eps, X1, X2, X3 ~ N(0, 1) i.i.d., eps ~ N(0, 0.5).
    """
    rng = np.random.default_rng(random_state)
    X = rng.normal(size=(n, 3))
    y = X.sum(axis=1) + X[:, 0] * X[:, 1] + rng.normal(scale=np.sqrt(0.5), size=n)
    return pd.DataFrame(X, columns=["X1", "X2", "X3"]), y
