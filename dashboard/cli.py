"""The command line's review: ``python app.py report --model FILE [--model FILE ...] --data FILE
--target COL --out review.html [--json numbers.json]``.

Files named on the command line are the operator's own: besides the formats the upload
form takes (.skops, .onnx, XGBoost, LightGBM, CatBoost), a pickle or joblib file is loaded
here, with a warning (loading one runs its code). Exit status 0 when the report is
written, 2 with a one-line reason on bad input (a missing column, an unreadable model)."""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path

import compute

from .api import Pickled
from .config import Config
from .doors import open_workspace, write_report
from .loading import LoadError, read_data
from .loading.checks import CLI_CONFIRM, PYTHON_CONFIRM
from .loading.formats import ACCEPTED_SUFFIXES, OWN, decision, format_of
from .state import make_context
from .store import Workspace


def report_main(argv: list[str] | None = None, *, stderr=None, prog: str = "python app.py report") -> int:
    """Run the review; returns the exit status. ``prog``: the command as the help names it
    (``why-it-performs report`` when the installed command runs it)."""
    err = stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog=prog,
        usage="%(prog)s --model FILE [--model FILE ...] --data FILE --target COLUMN --out FILE [options]",
        description="Write the dashboard's review of models on a data set, no browser.",
    )
    needed = parser.add_argument_group("required")  # --session (dashboard.report) stands for the first three
    needed.add_argument("--model", action="append", type=Path, help="a model file or MLflow folder (repeat for more)")
    needed.add_argument(
        "--data",
        type=Path,
        help="the data with the target column: a .csv or .parquet file, or a Parquet data set "
        "(a folder of files, or a quoted glob)",
    )
    needed.add_argument("--target", help="the outcome column of the data")
    needed.add_argument("--out", required=True, type=Path, help="the HTML report to write")
    parser.add_argument("--session", type=Path, help=argparse.SUPPRESS)  # dashboard.report's objects, pickled
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers behind it here")
    parser.add_argument("--loss", default=None, help="the loss PFI uses (default: squared error or log loss)")
    parser.add_argument("--cache-dir", default=".wip-cache", help="where results are cached (default .wip-cache)")
    parser.add_argument(
        "--allow-pickle",
        action="store_true",
        help="accept pickled models, as the server's --allow-pickle does: MLflow folders of a pickled flavour "
        "(scikit-learn or LightGBM saved with pickle/cloudpickle); they EXECUTE CODE when loaded, only for files "
        "you trust (a .pkl/.joblib file given with --model is the operator's own and loads with a warning anyway)",
    )
    add_row_options(parser)
    args = parser.parse_args(argv)
    if args.session is None and not (args.model and args.data and args.target):
        parser.error("give --model (one or more), --data and --target")
    bar: ProgressBar | None = None
    try:
        ctx = make_context(Config(cache_dir=args.cache_dir, allow_pickle=args.allow_pickle))
        if args.session is not None:  # objects of the Python session that called dashboard.report
            ws = _session_workspace(ctx, args)
        else:
            ws = open_files(
                ctx,
                args.model,
                args.data,
                args.target,
                loss=args.loss,
                err=err,
                held_out=args.held_out,
                output=args.output,
                labels=args.labels,
                columns_in_order=args.columns_in_order,
            )
        for note in ws.warnings:
            print(f"note: {note}", file=err)
        bar = ProgressBar(err)
        write_report(ctx, ws, args.out, json_path=args.json, progress=bar)
        bar.finish()
    except (LoadError, compute.ExplainError, OSError) as exc:  # LabelsError is an ExplainError
        if bar is not None and bar.drawn:
            bar.finish()  # the message on a line of its own, not after the bar
        print(f"error: {_one_line(exc)}", file=err)
        return 2
    print(f"wrote {args.out}" + (f" and {args.json}" if args.json else ""), file=err)
    return 0


def _session_workspace(ctx, args) -> Workspace:
    """The workspace of the objects ``dashboard.report`` pickled for this process (its data a
    frame, or the path of a data file or Parquet data set, read here as ``--data`` is)."""
    with open(args.session, "rb") as handle:
        given = pickle.load(handle)  # written by dashboard.api for this process: the caller's own
    models, data, target = given["models"], given["data"], given["target"]
    if isinstance(data, str):
        data = read_data(data, name=os.path.basename(data.rstrip("/")) or data, policy=ctx.policy)
    title = given.get("title") or f"{data.attrs.get('name', 'data')}: {', '.join(models)}"
    role = "held-out" if (args.held_out or given.get("held_out")) else "unknown"
    output = args.output if args.output is not None else given.get("positive_class")
    labels = args.labels if args.labels is not None else given.get("labels")
    return open_workspace(
        ctx,
        models,
        data,
        target,
        title=title,
        loss=args.loss,
        data_role=role,
        output=output,
        labels=labels,
        columns_in_order=bool(given.get("columns_in_order")),
        confirm_how=PYTHON_CONFIRM,  # the caller is dashboard.report()
    )


def add_row_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """What the rows are, which class to explain and the labels of features and classes: the
    options the upload form asks for."""
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="the models did not train on these rows (their errors are then not optimistic)",
    )
    parser.add_argument(
        "--class", dest="output", default=None, metavar="LABEL", help="the class whose probability is explained"
    )
    parser.add_argument(
        "--columns-in-order",
        action="store_true",
        help="the data's columns (the target left out) are in the order a model that names no inputs "
        "was trained on (XGBoost/LightGBM/CatBoost trained on arrays, a single-tensor ONNX model)",
    )
    parser.add_argument(
        "--labels",
        type=Path,
        default=None,
        metavar="FILE",
        help='labels of features and classes, a JSON file {"features": {"income_k": "Yearly income (k$)"}, '
        '"classes": {"1": "churned"}}, shown on axes, tables, findings and the report',
    )


def open_files(
    ctx,
    model_paths: list[Path],
    data_path: Path,
    target: str,
    *,
    loss=None,
    err=None,
    held_out: bool = False,
    output=None,
    labels=None,
    columns_in_order: bool = False,
) -> Workspace:
    """A workspace of model files and a data file named by the operator (see the module
    docstring); raises ``LoadError`` or ``compute.ExplainError`` naming what is wrong.
    ``held_out``: the models did not train on these rows; ``output``: the class explained;
    ``labels``: a labels file (or dict) of :mod:`dashboard.labels`; ``columns_in_order``:
    ``--columns-in-order`` (the order a model that names no inputs takes)."""
    data = read_data(data_path, name=data_path.name, policy=ctx.policy)
    models = {_name(path, i): _model(path, err or sys.stderr) for i, path in enumerate(model_paths)}
    title = f"{data_path.name}: {', '.join(models)}"
    role = "held-out" if held_out else "unknown"
    return open_workspace(
        ctx,
        models,
        data,
        target,
        title=title,
        loss=loss,
        data_role=role,
        output=output,
        labels=labels,
        columns_in_order=columns_in_order,
        confirm_how=CLI_CONFIRM,
    )


def _name(path: Path, i: int) -> str:
    return path.stem or f"model {i + 1}"


def _model(path: Path, err):
    """A model file: its path for the formats the upload form reads (loaded in the job), its
    bytes for a format the table of formats (:mod:`dashboard.loading.formats`) trusts only
    with an opt-in: a pickle here is the operator's own file, loaded in the job process."""
    suffix = path.suffix.lower()
    if path.is_dir():  # an MLflow model folder (MLmodel + the flavour's files): zipped by the door
        if not (path / "MLmodel").is_file():
            raise LoadError(
                f"{path}: a folder given as --model must be an MLflow model folder (no MLmodel in it).", field="model"
            )
        return path
    if not path.is_file():
        raise LoadError(f"{path}: no such model file.", field="model")
    fmt = format_of(suffix)
    if fmt is not None and decision(fmt, own=True) == OWN:  # a pickle: the operator's own, loaded with a warning
        print(f"warning: loading {path.name} runs the code it holds; load only your own files.", file=err)
        return Pickled(path.read_bytes(), "joblib")  # loaded in the job process, as a session's model
    if suffix in ACCEPTED_SUFFIXES:  # the table's, and .model / .bst (read by content)
        return path
    raise LoadError(f"{path.name}: not a model file ({', '.join(ACCEPTED_SUFFIXES)}).", field="model")


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:500] if text else type(exc).__name__


class ProgressBar:
    """A bar on the terminal: ``[#####.....]  50 %  label``, redrawn in place."""

    def __init__(self, out, width: int = 30):
        self.out, self.width, self.last = out, width, 0.0
        self.drawn = False  # something is on the bar's line

    def __call__(self, done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if now - self.last < 0.2 and done < total:
            return
        self.last = now
        share = min(max(done / max(total, 1), 0.0), 1.0)
        filled = int(round(share * self.width))
        line = f"\r[{'#' * filled}{'.' * (self.width - filled)}] {share:4.0%}  {label[:70]:<70}"
        print(line, end="", file=self.out, flush=True)
        self.drawn = True

    def finish(self) -> None:
        print(file=self.out)
        self.drawn = False


if __name__ == "__main__":  # python -m dashboard.cli ...: the review (dashboard.report runs it so)
    sys.exit(report_main(sys.argv[1:]))
