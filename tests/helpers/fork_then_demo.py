"""Start scikit-learn's OpenMP pool in this process (train a gradient boosting), then build
the gradient-boosting demo (what a test process, or any process that ran a model, does).
Exit 0 when the demo is built in time."""

import tempfile

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from dashboard.demos import build_demo
from dashboard.store import Store

rng = np.random.default_rng(0)
HistGradientBoostingClassifier(max_iter=20).fit(rng.normal(size=(2000, 5)), rng.integers(0, 2, 2000))
ws = Store(tempfile.mkdtemp(), build_demo=build_demo).workspace("demo-cancer")
print(ws.id, len(ws.models))
