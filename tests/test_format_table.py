"""One table of model formats (issue 45, item 4): which suffix is which format, its loader, its
checks and its trust level live in ``dashboard/loading/formats.py``, and every door reads it.

The pickle suffixes are spelled there only; the upload (the ``/upload`` route, the feedback after
an upload, the load job), the command line and the Python doors (``dashboard.show`` /
``dashboard.report``, through ``dashboard.doors``) take, refuse or load as the operator's own
exactly the suffixes the table says, each door tried with a file of every suffix."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

from dashboard import cli, doors, session_models
from dashboard.callbacks.load import describe_models
from dashboard.config import Config
from dashboard.loading import LoadError, Policy, formats, load_model
from dashboard.loading.sniff import AMBIGUOUS_SUFFIXES
from dashboard.server import UPLOAD_SUFFIXES, create_app
from dashboard.state import make_context

ROOT = Path(__file__).resolve().parent.parent
PICKLES = (".pkl", ".pickle", ".joblib")
#: every suffix of the table, those read by content, and some no door takes
SUFFIXES = sorted({*formats.MODEL_SUFFIXES, *AMBIGUOUS_SUFFIXES, ".h5", ".pt", ".xlsx", ".pkl2", ".csv"})
JUNK = b"not a model at all\n"


def _spelled(path: Path) -> set[str]:
    """The pickle suffixes a source file spells as a string (a constant, or quoted anywhere)."""
    text = path.read_text()
    tree = ast.parse(text)
    pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}  # f"{x}.pkl": a name
    found = {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in PICKLES and id(n) not in pieces
    }
    return found | {s for s in PICKLES if f'"{s}"' in text or f"'{s}'" in text}


def test_the_pickle_suffixes_are_spelled_in_the_table_only():
    sources = [*sorted((ROOT / "dashboard").rglob("*.py")), ROOT / "app.py"]
    assert len(sources) > 60, "the sources were not found"
    spelled = {str(p.relative_to(ROOT)): found for p in sources if (found := _spelled(p))}
    assert spelled == {"dashboard/loading/formats.py": set(PICKLES)}
    joblib = [str(p.relative_to(ROOT)) for p in sources if '".joblib"' in p.read_text()]
    assert joblib == ["dashboard/loading/formats.py"]


def test_the_table_says_what_is_trusted():
    """Every format is read as data but the pickle row, which needs the operator's opt-in (or is
    the operator's own file on the command line); the table keeps the suffixes' old order."""
    assert formats.PICKLE_SUFFIXES == PICKLES
    assert formats.MODEL_SUFFIXES == (".skops", ".onnx", ".json", ".ubj", ".txt", ".cbm", *PICKLES, ".zip")
    assert formats.ACCEPTED_SUFFIXES == (*formats.MODEL_SUFFIXES, *AMBIGUOUS_SUFFIXES)
    assert UPLOAD_SUFFIXES["model"] == formats.ACCEPTED_SUFFIXES
    for fmt in formats.FORMATS:
        opt_in = set(fmt.suffixes) <= set(PICKLES)
        assert fmt.trust == (formats.OPT_IN if opt_in else formats.SAFE), fmt.name
        assert formats.decision(fmt, Policy()) == (formats.REFUSE if opt_in else formats.LOAD)
        assert formats.decision(fmt, Policy(allow_pickle=True)) == formats.LOAD
        assert formats.decision(fmt, Policy(), own=True) == (formats.OWN if opt_in else formats.LOAD)
        assert (fmt.refusal != "") == opt_in and (fmt.upload_refusal != "") == opt_in


def _table(suffix: str, policy: Policy, *, own: bool = False) -> str:
    """What the table says a door does with a file of this suffix."""
    fmt = formats.format_of(suffix)
    if fmt is None:
        return "content" if suffix in AMBIGUOUS_SUFFIXES else "unknown"
    return formats.decision(fmt, policy, own=own)


@pytest.fixture(scope="module", params=[False, True], ids=["default", "allow-pickle"])
def app(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("formats")
    return create_app(Config(cache_dir=str(folder / "cache"), allow_pickle=request.param))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_upload_takes_and_refuses_the_tables_suffixes(app, suffix):
    """The /upload route keeps a model file iff the table (or reading by content) takes its
    suffix; the feedback after the upload refuses (and drops) exactly the formats the table
    refuses under the server's policy; the load job refuses them with the table's message."""
    ctx = app._wip_context
    said = _table(suffix, ctx.policy)
    name = f"model{suffix}"
    answer = app.server.test_client().post(
        "/upload",
        data={"kind": "model", "file": (io.BytesIO(JUNK), name)},
        content_type="multipart/form-data",
    )
    if said == "unknown":
        assert answer.status_code == 400 and "a model file must end in" in answer.json["error"]
        return
    assert answer.status_code == 200, answer.json
    upload = answer.json
    path = ctx.store.upload_path(upload["id"])
    feedback = describe_models(ctx, [upload])
    refusal = "refused. Pickle and joblib files run code when they are loaded"
    assert (refusal in str(feedback.error)) == (said == formats.REFUSE), feedback.error
    if said == formats.REFUSE:  # refused: dropped at once (junk of another format may be too, as invalid)
        assert ctx.store.upload_path(upload["id"]) is None
    with pytest.raises(LoadError) as raised:  # junk: every format refuses it, the pickles unopened
        load_model(path, name=name, policy=ctx.policy)
    unopened = f"{name} is a pickle/joblib file. Loading such a file executes any code it contains"
    assert str(raised.value).startswith(unopened) == (said == formats.REFUSE), raised.value


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_command_line_takes_the_tables_suffixes(tmp_path, suffix):
    """A model file named with --model: an opt-in format is the operator's own (its bytes,
    loaded in the job, with a warning), the table's other suffixes and those read by content are
    handed on as files, anything else is refused naming what is taken."""
    path = tmp_path / f"model{suffix}"
    path.write_bytes(JUNK)
    err = io.StringIO()
    said = _table(suffix, Policy(), own=True)
    if said == "unknown":
        with pytest.raises(LoadError, match="not a model file") as raised:
            cli._model(path, err)
        assert ", ".join(formats.ACCEPTED_SUFFIXES) in str(raised.value)
        return
    given = cli._model(path, err)
    if said == formats.OWN:
        assert isinstance(given, session_models.Pickled) and given.blob == JUNK
        assert "runs the code it holds" in err.getvalue()
    else:
        assert given == path and err.getvalue() == ""


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_python_doors_take_the_tables_suffixes(tmp_path, suffix):
    """``show()`` and ``report()`` hand a booster as its own file's bytes (``file:SUFFIX``) and a
    model file or folder by its path (``dashboard.doors``): kept iff the table names the format
    (a path's .model / .bst read by content); what the table refuses is refused by the load
    the job makes under the server's policy (the upload test above)."""
    ctx = make_context(Config(cache_dir=str(tmp_path / "cache")))
    said = _table(suffix, ctx.policy)
    given = session_models.Pickled(JUNK, "file:" + suffix)
    if said in ("unknown", "content"):
        with pytest.raises(LoadError, match="door reads"):
            doors._entry(ctx, "m", given)
    else:
        entry = doors._entry(ctx, "m", given)
        assert entry.path.endswith(suffix) and entry.name == "m"
    path = tmp_path / f"model{suffix}"
    path.write_bytes(b"tree\nversion=v4\n" if suffix in AMBIGUOUS_SUFFIXES else JUNK)  # LightGBM text by content
    if said == "unknown":
        with pytest.raises(LoadError, match="not a model file this door reads"):
            doors._entry(ctx, "m", path)
    else:
        assert doors._entry(ctx, "m", path).path.endswith(".txt" if said == "content" else suffix)
