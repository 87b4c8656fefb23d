"""Hostile models for tests: importable in the child processes that load them."""

import os
import signal

import numpy as np


class SuicidalRegressor:
    """Fits nothing; its predict kills its own process (as a crafted native crash would)."""

    feature_names_in_ = np.array(["X1", "X2", "X3"], dtype=object)
    n_features_in_ = 3

    def fit(self, X, y):
        return self

    def predict(self, X):
        os.kill(os.getpid(), signal.SIGKILL)
