"""Conditional importance (cs-PFI) against the true conditional PFI, as in the simulation of
Molnar, König, Bischl & Casalicchio (2023), "Model-agnostic feature importance and effects
with dependent features: a conditional subgroup approach" (their cs-PFI experiment, as the
authors' code runs it: github.com/christophM/paper_conditional_subgroups,
experiments/experiment-cpfi.R); and the cost of cs-PFI and of the H statistics in model rows
and seconds against the model's raw predict.

Setup (their Scenario I, the model is the true function): X ~ N(0, I_10), then x1 is
redrawn from g(x_-1):

    independent   x1 ~ N(0, 1)
    linear        x1 ~ N(x2, 1)
    non-linear    x2 > 0: N(3, 1);  x2 <= 0 and x3 > 0: N(-3, 2^2);  else N(0, 5^2)

y = sum_j x_j + x1 x2 + N(0, 1), squared error. The true conditional PFI of x1 is
E[(f(x) - f(x~))^2] with x~1 redrawn from g (Monte Carlo on 400,000 rows): 4 for the
independent and linear g. The paper's pattern: cs-PFI is close to the truth for every g
(its MSE against the truth at n = 3,000: 0.14, 0.40 and 1.18 with CART), the marginal PFI
far from it as soon as x1 depends on the others (37 and 1,156); and with deeper trees (more
subgroups) the error falls, then levels off (depth 1: 5.7, depth 3: 0.30, depth 4: 0.24).

Run: ``python benchmarks/cs_pfi_simulation.py [--repeats 20]`` (about a minute).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import compute

P = 10
COLUMNS = [f"x{j + 1}" for j in range(P)]


class TrueModel:
    """f(x) = sum_j x_j + x1 x2: the model is the data-generating function."""

    def predict(self, X):
        X = np.asarray(X, float)
        return X.sum(axis=1) + X[:, 0] * X[:, 1]


def draw_x1(kind: str, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(X)
    if kind == "independent":
        return rng.normal(size=n)
    if kind == "linear":
        return X[:, 1] + rng.normal(size=n)
    mean = np.where(X[:, 1] > 0, 3.0, np.where(X[:, 2] > 0, -3.0, 0.0))
    scale = np.where(X[:, 1] > 0, 1.0, np.where(X[:, 2] > 0, 2.0, 5.0))
    return mean + scale * rng.normal(size=n)


def sample(kind: str, n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    X = rng.normal(size=(n, P))
    X[:, 0] = draw_x1(kind, X, rng)
    y = TrueModel().predict(X) + rng.normal(size=n)
    return pd.DataFrame(X, columns=COLUMNS), y


def truth(kind: str, rng: np.random.Generator, n: int = 400_000) -> float:
    X, _ = sample(kind, n, rng)
    other = X.to_numpy().copy()
    other[:, 0] = draw_x1(kind, other, rng)
    model = TrueModel()
    return float(np.mean((model.predict(X) - model.predict(other)) ** 2))


def estimates(kind: str, n: int, repeats: int, max_depth: int, alpha: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(repeats):
        X, y = sample(kind, n, rng)
        result = compute.conditional_importance(
            TrueModel(), X, y, features=["x1"], n_repeats=5, max_depth=max_depth, alpha=alpha, random_state=r
        )
        frame = result.to_frame()
        rows.append(
            {
                "conditional": frame.loc["x1", "importance"],
                "marginal": frame.loc["x1", "marginal"],
                "subgroups": frame.loc["x1", "n_subgroups"],
            }
        )
    return pd.DataFrame(rows)


def raw_block(X: pd.DataFrame, rows: int) -> pd.DataFrame:
    """``rows`` rows as the methods predict them: copies of X, each with one column (in
    turn) shuffled (a repeated block unshuffled predicts several times faster: the same
    paths through the trees again and again)."""
    rng = np.random.default_rng(0)
    parts = []
    for k in range(int(np.ceil(rows / len(X)))):
        part = X.copy()
        column = X.columns[k % X.shape[1]]
        part[column] = rng.permutation(part[column].to_numpy())
        parts.append(part)
    return pd.concat(parts, ignore_index=True).iloc[:rows]


def cost(repeats: int = 3) -> pd.DataFrame:
    """Model rows and seconds of cs-PFI and the H statistics on the X3 demo's forest,
    against its raw predict on the same number of rows."""
    from sklearn.ensemble import RandomForestRegressor

    from compute.datasets import x3_interaction

    X_train, y_train = x3_interaction(5000, random_state=1)
    X, y = x3_interaction(500, random_state=2)
    forest = RandomForestRegressor(n_estimators=60, min_samples_leaf=5, random_state=0, n_jobs=1).fit(X_train, y_train)
    out = []
    for name, call, model_rows in (
        (
            "cs-PFI (10 repeats, with marginal)",
            lambda: compute.conditional_importance(forest, X, y, n_repeats=10),
            2 * len(X) * X.shape[1] * 10 + 2 * len(X),
        ),
        (
            "H statistics (200 rows, grid 12)",
            lambda: compute.interaction_strength(forest, X, n_obs=200, grid_size=12),
            None,
        ),
    ):
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            result = call()
            seconds.append(time.perf_counter() - start)
        rows = getattr(result, "model_rows", model_rows)
        block = raw_block(X, rows)
        start = time.perf_counter()
        forest.predict(block)
        raw = time.perf_counter() - start
        out.append({"method": name, "model rows": rows, "seconds": min(seconds), "raw predict": raw})
    frame = pd.DataFrame(out).set_index("method")
    frame["ratio"] = frame["seconds"] / frame["raw predict"]
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="simulated data sets per setting")
    parser.add_argument("--n", type=int, default=1000, help="rows per data set (the paper's test third of 3,000)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"cs-PFI of x1 against the true conditional PFI; {args.repeats} data sets of {args.n} rows, p = {P}\n")
    table = []
    for kind in ("independent", "linear", "non-linear"):
        true = truth(kind, rng)
        found = estimates(kind, args.n, args.repeats, max_depth=4, alpha=0.05, seed=1)
        table.append(
            {
                "g": kind,
                "true cPFI": true,
                "cs-PFI median": found["conditional"].median(),
                "cs-PFI MSE": float(((found["conditional"] - true) ** 2).mean()),
                "marginal median": found["marginal"].median(),
                "marginal MSE": float(((found["marginal"] - true) ** 2).mean()),
                "subgroups": found["subgroups"].median(),
            }
        )
    print(pd.DataFrame(table).set_index("g").round(3).to_string())
    print("\nDepth (linear g, splits wherever the tree can: alpha = 1, as the paper's depth experiment)\n")
    true = truth("linear", rng)
    depth = []
    for max_depth in range(0, 6):
        found = estimates("linear", args.n, args.repeats, max_depth=max_depth, alpha=1.0, seed=2)
        depth.append(
            {
                "max depth": max_depth,
                "subgroups": found["subgroups"].median(),
                "cs-PFI median": found["conditional"].median(),
                "MSE vs truth": float(((found["conditional"] - true) ** 2).mean()),
            }
        )
    print(f"true cPFI {true:.3f}")
    print(pd.DataFrame(depth).set_index("max depth").round(3).to_string())
    print(
        "\nCost on the X3 demo's forest (500 rows, 3 features): seconds against a raw predict of as many rows "
        "(one column shuffled per copy of the data)\n"
    )
    print(cost().round(3).to_string())


if __name__ == "__main__":
    main()
