"""Run the whole test suite: unit tests and browser tests (README's second command).

Browser tests need Debian's ``chromium`` and ``chromium-driver``. When they are missing
and we are root, they are installed with apt first (the machines have the Debian mirror
but no browser downloads: never ``playwright install``). Extra arguments go to pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def ensure_chromium() -> None:
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        sys.exit("Browser tests need Debian's chromium and chromium-driver: "
                 "apt-get install -y chromium chromium-driver (as root).")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium", "chromium-driver"],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def main() -> int:
    ensure_chromium()
    return subprocess.call([sys.executable, "-m", "pytest", "-q", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
