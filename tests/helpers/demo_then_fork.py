"""Build the gradient-boosting demo in this process, then predict with it in an isolated
child (what a web worker then a job does). Exit 0 when the child answers in time."""

import sys
import tempfile

from dashboard.demos import build_demo
from dashboard.isolation import Limits, isolated
from dashboard.loading import load_model
from dashboard.store import Store


def predict(store, ws):
    entry = ws.models[0]  # gradient boosting (OpenMP)
    model = load_model(store.path(entry.path), name=entry.name)
    data = store.data(ws)
    return model.predict_proba(data[list(entry.features)]).shape


store = Store(tempfile.mkdtemp(), build_demo=build_demo)
ws = store.workspace("demo-cancer")
print(isolated(predict, store, ws, what="The demo", limits=Limits(seconds=float(sys.argv[1]))))
