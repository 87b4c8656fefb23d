"""``python -m dashboard [serve|report] ...``: the command ``why-it-performs``
(:mod:`dashboard.command`)."""

import sys

from .command import main

if __name__ == "__main__":
    sys.argv[0] = "python -m dashboard"  # argparse names the program after it (Python 3.11 says __main__.py)
    main(prog="python -m dashboard")
