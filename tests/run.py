"""Run the whole test suite: unit tests and browser tests (README's second command).

Browser tests need Debian's ``chromium`` and ``chromium-driver``, the Celery test
``redis-server``. When they are missing and we are root, they are installed with apt first
(the machines have the Debian mirror but no browser downloads: never ``playwright install``).
Before pytest it runs ``ruff check``, ``ruff format --check`` and ``mypy`` (compute/ and dashboard/), as
configured in pyproject.toml. Extra arguments go to pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

PACKAGES = {"chromium": "chromium", "chromedriver": "chromium-driver", "redis-server": "redis-server"}


def ensure_system_packages() -> None:
    """Debian packages the browser and Celery tests need (browsers never come from the web)."""
    missing = [pkg for exe, pkg in PACKAGES.items() if not shutil.which(exe)]
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


def main() -> int:
    ensure_system_packages()
    ensure_peers()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = run_checks(root)
    if code:
        return code
    return subprocess.call([sys.executable, "-m", "pytest", "-q", *sys.argv[1:]], cwd=root)


if __name__ == "__main__":
    sys.exit(main())
