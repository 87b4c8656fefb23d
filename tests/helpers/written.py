"""Numbers as a page writes them: is a written number a value at the digits it shows?"""

from __future__ import annotations

import math

#: a number as the page writes it: a sign (ASCII or U+2212), thousands separators, an exponent
NUM = r"[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?"


def agrees(written: str, value: float) -> bool:
    """``written`` is ``value`` rounded to the digits it is written with ("0.0479" is any value
    in [0.04785, 0.04795]; "1,094" any in [1093.5, 1094.5]; "0" only 0)."""
    word = written.strip().replace(",", "").replace("−", "-")
    number = float(word)
    if number == 0:
        return abs(value) < 1e-15
    digits = len(word.lower().split("e")[0].lstrip("-").replace(".", "").lstrip("0"))
    unit = 10.0 ** (math.floor(math.log10(abs(number))) - digits + 1)
    return abs(value - number) <= 0.5 * unit * (1 + 1e-9)
