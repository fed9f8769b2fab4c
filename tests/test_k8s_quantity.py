"""Kubernetes quantities are parsed exactly, in every suffix, and anything else is refused."""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from packer.io.k8s_quantity import BINARY_SUFFIXES, DECIMAL_SUFFIXES, decimal_text, parse_quantity

SUFFIXES = {**{k: Fraction(v) for k, v in BINARY_SUFFIXES.items()}, **DECIMAL_SUFFIXES,
            **{f"e{n}": Fraction(10) ** n for n in (-3, 0, 3, 6)}, "E3": Fraction(1000)}


@pytest.mark.parametrize("text, value", [
    ("250m", Fraction(1, 4)), ("1.5Gi", Fraction(3 * 2**29)), ("2G", Fraction(2 * 10**9)), ("1e3", Fraction(1000)),
    ("100Ki", Fraction(102400)), ("4", Fraction(4)), (".5", Fraction(1, 2)), ("1.", Fraction(1)), ("0.1", Fraction(1, 10)),
    ("15692360Ki", Fraction(15692360 * 1024)), ("1E", Fraction(10**18)), ("1E3", Fraction(1000)), ("500n", Fraction(1, 2 * 10**6)),
    ("+2k", Fraction(2000)), (3, Fraction(3)), ("  7Mi ", Fraction(7 * 2**20)),
])
def test_examples(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "12x", "1.5.1", "Gi", "1 Gi", "1gi", "1e", "1.5e", "--1", "0x10", None, True, [1]])
def test_not_a_quantity(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


@given(numerator=st.integers(min_value=0, max_value=10**15), places=st.integers(min_value=0, max_value=6), suffix=st.sampled_from(sorted(SUFFIXES)))
def test_any_decimal_in_any_suffix_parses_back_exactly(numerator, places, suffix):
    value = Fraction(numerator, 10**places) * SUFFIXES[suffix]
    # value / multiplier is a terminating decimal for every suffix (denominators are powers of 2 and 5)
    assert parse_quantity(decimal_text(value / SUFFIXES[suffix], places=40) + suffix) == value


@given(st.fractions(min_value=0, max_value=10**6))
def test_decimal_text_is_exact_or_rounds_up_at_nano(value):
    text = decimal_text(value)
    parsed = parse_quantity(text)
    assert value <= parsed < value + Fraction(1, 10**9)
    if (value * 10**9).denominator == 1:
        assert parsed == value
