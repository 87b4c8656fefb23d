"""Run the whole test suite: unit tests and browser tests (README's second command).

Browser tests need Debian's ``chromium`` and ``chromium-driver`` (and ``nginx-light`` for the
page behind a reverse proxy), the Celery test ``redis-server``. When they are missing and we
are root, they are installed with apt first (the machines have the Debian mirror but no
browser downloads: never ``playwright install``).
The accessibility test needs axe-core, fetched once from the npm registry (pinned version,
checked against the registry's sha512 integrity). Before pytest it runs ``ruff check``,
``ruff format --check`` and ``mypy`` (compute/ and dashboard/), as configured in
pyproject.toml. Extra arguments go to pytest.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

PACKAGES = {
    "chromium": "chromium",
    "chromedriver": "chromium-driver",
    "redis-server": "redis-server",
    "nginx": "nginx-light",  # the reverse proxy of tests/test_browser_prefix.py
}


def ensure_system_packages() -> None:
    """Debian packages the browser and Celery tests need (browsers never come from the web)."""
    missing = [pkg for exe, pkg in PACKAGES.items() if not (shutil.which(exe) or os.path.exists(f"/usr/sbin/{exe}"))]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        sys.exit(
            f"The browser and Celery tests need Debian packages: apt-get install -y {' '.join(missing)} (as root)."
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


#: Peer libraries the tests compare with whose declared pins (numpy<2, pandas<2) clash with
#: ours although their code runs on our versions: installed without dependencies (the
#: dependencies they need are listed too), and the tests that use them then require them.
PEERS = ("pyartemis==0.1.5", "seaborn==0.13.2", "tqdm==4.70.1", "networkx==3.6.1")


def ensure_peers() -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *PEERS], check=True, stdout=subprocess.DEVNULL
    )
    os.environ["WIP_REQUIRE_PEERS"] = "1"


#: axe-core, the accessibility rules engine the browser test runs inside the page (issue 28):
#: the npm registry's tarball of this version, checked against the ``dist.integrity`` the
#: registry publishes for it (``npm view axe-core@4.14.1 dist.integrity``). To update, change
#: both. Kept in a cache folder, checked again on every run; the test reads WIP_AXE_JS.
AXE_VERSION = "4.14.1"
AXE_INTEGRITY = "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
AXE_URL = f"https://registry.npmjs.org/axe-core/-/axe-core-{AXE_VERSION}.tgz"


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def ensure_axe(cache: Path) -> None:
    """axe-core's ``axe.min.js`` from the pinned, verified tarball (downloaded once into
    ``cache``); its path goes to the tests as WIP_AXE_JS, and WIP_REQUIRE_AXE makes the
    accessibility test fail rather than skip without it."""
    os.environ["WIP_REQUIRE_AXE"] = "1"
    tarball = cache / f"axe-core-{AXE_VERSION}.tgz"
    data = tarball.read_bytes() if tarball.exists() else b""
    if _integrity(data) != AXE_INTEGRITY:
        print(f"fetching {AXE_URL}", flush=True)
        with urllib.request.urlopen(AXE_URL, timeout=120) as response:
            data = response.read()
        if _integrity(data) != AXE_INTEGRITY:
            sys.exit(f"{AXE_URL} does not match its pinned integrity {AXE_INTEGRITY}: not used.")
        cache.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(tarball)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        member = archive.extractfile("package/axe.min.js")
        if member is None:
            sys.exit(f"{tarball} holds no package/axe.min.js")
        script = cache / f"axe-core-{AXE_VERSION}.min.js"
        script.write_bytes(member.read())
    os.environ["WIP_AXE_JS"] = str(script)


# The anchors' habits, before the tests: lint, formatting and types (configured in pyproject).
CHECKS = (["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"])


def run_checks(root: str) -> int:
    """ruff check, ruff format --check and mypy (compute/, dashboard/); the first failure's exit code."""
    for command in CHECKS:
        print("$", " ".join(command), flush=True)
        code = subprocess.call([sys.executable, "-m", *command], cwd=root)
        if code:
            return code
    return 0


def compile_tree_walk(root: str) -> None:
    """Compile the tree engine's numba kernels once, into numba's cache beside them (about
    12 s cold), as the Docker image does at build: otherwise the first server a test starts
    (its preload loads them) or the first job would pay it inside its time limits."""
    code = "from compute.trees import walk; problem = walk.warm(); print(problem or 'tree walk compiled')"
    subprocess.call([sys.executable, "-c", code], cwd=root)


def main() -> int:
    ensure_system_packages()
    ensure_peers()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ensure_axe(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "why-it-performs")
    code = run_checks(root)
    if code:
        return code
    compile_tree_walk(root)
    return subprocess.call([sys.executable, "-m", "pytest", "-q", *sys.argv[1:]], cwd=root)


if __name__ == "__main__":
    sys.exit(main())
