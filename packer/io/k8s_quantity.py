"""Kubernetes resource quantities (``250m``, ``1.5Gi``, ``2G``, ``1e3``, ``100Ki``), parsed exactly.

The grammar is Kubernetes' own (``k8s.io/apimachinery/pkg/api/resource``): a decimal
number (``1``, ``1.5``, ``.5``, ``1.``), optionally signed, then one suffix: a binary SI
suffix (``Ki`` = 2**10 ... ``Ei`` = 2**60), a decimal SI suffix (``n``, ``u``, ``m``,
none, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or a decimal exponent (``e3``, ``E-2``).
Values are :class:`fractions.Fraction`, so ``0.1`` plus ``0.2`` cores is exactly
``0.3``; callers convert to cores or GiB at the end.
"""
from __future__ import annotations

import re
from fractions import Fraction

BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL_SUFFIXES = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1), "k": Fraction(10**3),
                    "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18)}
BYTES_PER_GIB = 2**30

# The exponent form comes before the bare "E" (exa) so that "1E3" reads as 1000.
_QUANTITY = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)")


def parse_quantity(text: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity, in the resource's base unit (cores for cpu, bytes for memory).

    A JSON number is accepted as the plain number it is. Raises ``ValueError`` naming
    the text when it is no quantity.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ValueError(f"not a quantity: {text!r}")
    if isinstance(text, (int, float)):
        return Fraction(text)
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r} (expected e.g. 250m, 1.5Gi, 2G, 1e3)")
    sign, number, suffix = match.groups()
    value = Fraction(number)
    if suffix in BINARY_SUFFIXES:
        value *= BINARY_SUFFIXES[suffix]
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        value *= Fraction(10) ** int(suffix[1:])
    else:
        value *= DECIMAL_SUFFIXES[suffix]
    return -value if sign == "-" else value


def decimal_text(value: Fraction, places: int = 9) -> str:
    """``value`` as a plain decimal number (a valid quantity), exact when it is a terminating decimal.

    Otherwise it is rounded *up* at ``places`` decimals, as Kubernetes rounds a quantity
    finer than its nano scale.
    """
    value = Fraction(value)
    scaled = value * 10**places
    units = -((-scaled.numerator) // scaled.denominator)  # ceiling
    exact = Fraction(units, 10**places) == value
    if not exact:
        value = Fraction(units, 10**places)
    sign = "-" if value < 0 else ""
    value = abs(value)
    whole, frac = divmod(value.numerator, value.denominator)
    digits = ""
    rest = Fraction(frac, value.denominator)
    while rest and len(digits) < 60:
        rest *= 10
        digit, rest = divmod(rest, 1)
        digits += str(int(digit))
    return f"{sign}{whole}" + (f".{digits}" if digits else "")
