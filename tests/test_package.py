"""Issue 43, item 2: installed as a package. ``pip install why-it-performs`` (a wheel, not the
repository) installed ``compute`` and ``dashboard`` but no way to start the server or write a
report: ``app.py`` is not in the wheel. The command now lives in the package
(``dashboard.command``): ``why-it-performs`` (serve by default, ``report``) and ``python -m
dashboard``.

The wheel is built from a copy of the files it is made of (nothing written into the
repository), with this interpreter's setuptools (``--no-build-isolation``: no download), and
installed without its dependencies into a fresh virtual environment that sees this
interpreter's packages; every command runs from a folder outside the repository."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import runpy
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
from helpers.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "compute", "dashboard", "assets")  # what the wheel is built from
BIN = "Scripts" if os.name == "nt" else "bin"


def _cannot_build() -> str | None:
    """Why this interpreter cannot build a wheel without downloading anything, or None:
    setuptools builds wheels itself from 70.1, older ones need the ``wheel`` package."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return "setuptools is not installed"
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if numbers >= (70, 1) or importlib.util.find_spec("wheel") is not None:
        return None
    return f"setuptools {version} builds no wheel without the 'wheel' package (setuptools>=70.1 does)"


def _run(command: list, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel, and a virtual environment with it installed: its ``python``, its
    ``why-it-performs``, the environment to run them with and a folder outside the repository."""
    why = _cannot_build()
    if why:
        pytest.skip(f"cannot build the wheel here: {why}")
    base = tmp_path_factory.mktemp("package")
    source = base / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", base, source],
        cwd=base,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = base.glob("why_it_performs-*.whl")
    venv = base / "venv"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], cwd=base)
    assert made.returncode == 0, made.stderr
    python = venv / BIN / "python"
    site_packages = Path(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], base).stdout.strip()
    )
    # this interpreter's packages (the dependencies): the system's come with --system-site-packages; those of a
    # virtual environment it runs in, or of the user's site, after the new environment's own
    theirs = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")} if sys.prefix != sys.base_prefix else set()
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        theirs.add(site.getusersitepackages())
    lines = [f"import site; site.addsitedir({path!r})" for path in sorted(theirs)]
    (site_packages / "zz_test_interpreter.pth").write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("WIP_")}
    env["PATH"] = os.pathsep.join([str(venv / BIN), env.get("PATH", "")])
    done = _run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "--quiet", wheel], base, env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    outside = base / "work"
    outside.mkdir()
    return {
        "wheel": wheel,
        "python": python,
        "command": venv / BIN / "why-it-performs",
        "site": site_packages.resolve(),
        "env": env,
        "cwd": outside,
    }


def test_the_wheel_holds_every_package_the_assets_and_the_command(installed):
    with zipfile.ZipFile(installed["wheel"]) as wheel:
        names = set(wheel.namelist())
        entry_points = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    packages = sorted(
        str(init.parent.relative_to(ROOT))
        for part in ("compute", "dashboard")
        for init in (ROOT / part).rglob("__init__.py")
    )
    missing = [p for p in packages if f"{p}/__init__.py" not in names]
    assert not missing, f"add them to [tool.setuptools] packages in pyproject.toml: {missing}"
    assets = sorted(str(p.relative_to(ROOT / "assets")) for p in (ROOT / "assets").rglob("*") if p.is_file())
    assert assets and all(f"dashboard/assets/{a}" in names for a in assets), sorted(names)
    assert "dashboard/gunicorn_conf.py" in names and "dashboard/__main__.py" in names
    assert "why-it-performs = dashboard.command:main" in entry_points
    assert not any(n.startswith(("app.py", "assets/", "tests/")) for n in names)  # nothing at the top level but ours


def test_the_installed_command_and_module_answer_from_outside_the_repository(installed):
    env, cwd = installed["env"], installed["cwd"]
    where = _run(
        [installed["python"], "-c", "import compute, dashboard; print(dashboard.__file__, compute.__file__)"], cwd, env
    )
    assert where.returncode == 0, where.stderr
    for path in where.stdout.split():
        assert Path(path).resolve().is_relative_to(installed["site"]), path  # the venv's copy, not the repository
    served = _run([installed["command"], "--help"], cwd, env)
    assert served.returncode == 0, served.stderr
    assert served.stdout.startswith("usage: why-it-performs")
    for option in ("--model", "--data", "--target", "--port", "--cache-dir", "--held-out", "--labels"):
        assert option in served.stdout, option
    assert "why-it-performs report --help" in served.stdout.split("subcommands:")[1]
    review = _run([installed["command"], "report", "--help"], cwd, env)
    assert review.returncode == 0 and review.stdout.startswith("usage: why-it-performs report"), review.stderr
    assert "required:" in review.stdout
    module = _run([installed["python"], "-m", "dashboard", "--help"], cwd, env)
    assert module.returncode == 0 and module.stdout.startswith("usage: python -m dashboard"), module.stderr
    assert "python -m dashboard report --help" in module.stdout
    explicit = _run([installed["command"], "serve", "--help"], cwd, env)
    assert explicit.returncode == 0 and explicit.stdout == served.stdout


@pytest.fixture(scope="module")
def x3_files(installed):
    """The X3 demo's data (the simulation of the built-in demo, fewer rows) and a random
    forest trained on it, as files an operator would have."""
    import skops.io as sio
    from sklearn.ensemble import RandomForestRegressor

    from compute.datasets import x3_interaction

    folder = installed["cwd"]
    X, y = x3_interaction(400, random_state=1)
    sio.dump(RandomForestRegressor(n_estimators=20, random_state=0).fit(X, y), folder / "forest.skops")
    X.assign(Y=y).to_csv(folder / "x3.csv", index=False)
    return folder


def test_the_installed_command_writes_the_report(installed, x3_files):
    folder = x3_files
    args = ["--model", "forest.skops", "--data", "x3.csv", "--target", "Y", "--out", "review.html"]
    done = _run(
        [installed["command"], "report", *args, "--json", "numbers.json", "--cache-dir", "cache"],
        folder,
        installed["env"],
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote review.html and numbers.json" in done.stderr
    html = (folder / "review.html").read_text()
    assert "<title>Why it performs: x3.csv: forest</title>" in html
    assert "<h1>Why the model performs as it does</h1>" in html and "<h3>Permutation feature importance</h3>" in html
    assert 'class="plotly-graph-div"' in html and "Plotly.newPlot(" in html  # a figure, plotly.js inlined
    assert all(f'"{c}"' in html for c in ("X1", "X2", "X3"))
    numbers = json.loads((folder / "numbers.json").read_text())
    assert numbers["data"]["models"] == ["forest"] and numbers["data"]["rows"] == 400
    assert numbers["state"]["feature"] in ("X1", "X2")  # the X3 simulation's important pair


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


def test_the_installed_command_serves_the_page_and_its_assets_and_stops_on_sigterm(installed):
    port = free_port()
    env = {**installed["env"], "WIP_WORKERS": "1"}  # read by the installed gunicorn settings
    command = [installed["command"], "serve", "--port", str(port), "--cache-dir", "serve-cache", "--no-warm"]
    server = subprocess.Popen(
        [str(part) for part in command],
        cwd=installed["cwd"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        page, deadline = b"", time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            try:
                status, page = _get(f"http://127.0.0.1:{port}/")
                break
            except OSError:
                time.sleep(0.3)
        assert server.poll() is None and page, server.stderr.read() if server.poll() is not None else "no answer"
        assert status == 200 and b"<title>Why it performs</title>" in page
        assets = re.findall(rb'"(/assets/[^"?]+\.(?:css|js))(?:\?[^"]*)?"', page)
        assert assets, page[:2000]
        for asset in sorted(set(assets)):
            status, body = _get(f"http://127.0.0.1:{port}{asset.decode()}")
            assert status == 200 and body == (ROOT / asset.decode().lstrip("/")).read_bytes(), asset
        server.send_signal(signal.SIGTERM)
        start = time.monotonic()
        server.wait(timeout=5)
        assert time.monotonic() - start < 5
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        else:  # anything of its session left behind
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_the_installed_gunicorn_settings_are_the_repositorys():
    """``python app.py`` reads ``gunicorn.conf.py``; the installed command its copy in the
    package (``dashboard/gunicorn_conf.py``): the same values."""
    from dashboard import command

    def values(path: Path) -> dict:
        found = runpy.run_path(str(path))
        return {k: v for k, v in found.items() if not k.startswith("_") and not callable(v) and k != "os"}

    repository = values(ROOT / "gunicorn.conf.py")
    assert repository == values(command.GUNICORN_CONF) and repository["worker_class"] == "dashboard.serving.Worker"
