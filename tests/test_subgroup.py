"""Tests for :mod:`compute.subgroup`: the subgroup condition parser and formatter."""

from __future__ import annotations

import operator
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compute.errors import InputError, SubgroupError
from compute.subgroup import format_condition, parse_subgroup

N = 200


@pytest.fixture(scope="module")
def X() -> pd.DataFrame:
    """A seeded frame with float, int, bool, text, categorical and spaced columns, with NaNs."""
    rng = np.random.default_rng(0)
    x1 = rng.normal(size=N)
    x1[rng.random(N) < 0.1] = np.nan
    group = pd.Series(rng.choice(["a", "b", "c"], size=N), dtype="str")
    group[rng.random(N) < 0.1] = np.nan
    sizes = pd.Categorical(rng.choice(["S", "M", "L"], size=N), categories=["S", "M", "L"], ordered=True)
    sizes[rng.random(N) < 0.1] = np.nan
    return pd.DataFrame(
        {
            "x1": x1,
            "X3": rng.integers(-2, 3, size=N),
            "flag": rng.random(N) < 0.5,
            "group": group.to_numpy(),
            "size": sizes,
            "color": pd.Categorical(rng.choice(["red", "green", "blue"], size=N)),
            "level": pd.Categorical(rng.choice([1, 2, 3], size=N)),
            "petal width": rng.uniform(0, 3, size=N).round(1),
            "when": pd.date_range("2024-01-01", periods=N, freq="D"),
        },
        index=[f"row{i}" for i in range(N)],
    )


def check(condition: str, X: pd.DataFrame, expected: pd.Series) -> None:
    """Assert that ``condition`` selects exactly ``expected`` (missing counted as False)."""
    result = parse_subgroup(condition, X)
    assert result.dtype == bool
    pd.testing.assert_series_equal(result, expected.fillna(False).astype(bool), check_names=False)


def test_frame_has_pandas3_str_dtype(X: pd.DataFrame) -> None:
    """The text column uses the pandas 3 ``str`` dtype and the fixture holds missing values."""
    assert pd.api.types.is_string_dtype(X["group"].dtype) and X["group"].dtype != object
    assert X["x1"].isna().any() and X["group"].isna().any() and X["size"].isna().any()


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_comparisons_on_float_column(X: pd.DataFrame, op: str) -> None:
    """Each comparison operator matches pandas on a float column, never selecting NaN."""
    fn = {
        "==": operator.eq,
        "!=": operator.ne,
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
    }[op]
    value = float(X["x1"].dropna().iloc[3])
    check(f"x1 {op} {value!r}", X, fn(X["x1"], value) & X["x1"].notna())


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_comparisons_on_int_column_with_negative_literal(X: pd.DataFrame, op: str) -> None:
    """Integer columns compare with negative integer literals."""
    fn = {
        "==": operator.eq,
        "!=": operator.ne,
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
    }[op]
    check(f"X3 {op} -1", X, fn(X["X3"], -1))


def test_not_equal_excludes_missing(X: pd.DataFrame) -> None:
    """``!=`` does not select rows where the column is missing."""
    assert not parse_subgroup("x1 != 12345", X)[X["x1"].isna()].any()


def test_not_is_plain_complement(X: pd.DataFrame) -> None:
    """``not`` complements its operand, so it does select missing rows."""
    check("not x1 > 0", X, ~(X["x1"] > 0))


def test_scientific_notation_literal(X: pd.DataFrame) -> None:
    """Numbers may use scientific notation."""
    check("x1 > -1.5e-1", X, X["x1"] > -0.15)


@pytest.mark.parametrize("literal, value", [("true", True), ("FALSE", False), ("1", True), ("0", False)])
def test_bool_column(X: pd.DataFrame, literal: str, value: bool) -> None:
    """Boolean columns compare with true/false (any case) or with 1/0."""
    check(f"flag == {literal}", X, X["flag"] == value)


def test_bool_column_with_missing_values() -> None:
    """A boolean column with NaN (object dtype) compares as boolean and never selects NaN."""
    df = pd.DataFrame({"b": [True, np.nan, False, True]})
    check("b != false", df, pd.Series([True, False, False, True]))


def test_string_equality(X: pd.DataFrame) -> None:
    """Text columns support ``==`` and ``!=`` with quoted strings; missing never matches."""
    check("group == 'a'", X, X["group"] == "a")
    check('group != "a"', X, (X["group"] != "a") & X["group"].notna())


def test_string_value_not_observed_selects_nothing(X: pd.DataFrame) -> None:
    """Comparing with a value the column never takes is not an error."""
    assert not parse_subgroup("group == 'zzz'", X).any()


def test_string_literal_escapes() -> None:
    """Backslash escapes a quote or a backslash inside a string literal."""
    df = pd.DataFrame({"s": pd.Series(["it's", 'say "hi"', "a\\b", "x"], dtype="str")})
    check(r"""s in ['it\'s', "say \"hi\"", 'a\\b']""", df, pd.Series([True, True, True, False]))


def test_in_and_not_in(X: pd.DataFrame) -> None:
    """``in`` and ``not in`` match ``isin``; ``not in`` excludes missing values."""
    check("group in ['a', 'c']", X, X["group"].isin(["a", "c"]))
    check("group not in ['a', 'c']", X, ~X["group"].isin(["a", "c"]) & X["group"].notna())
    check("X3 in [-2, 0, 2]", X, X["X3"].isin([-2, 0, 2]))


def test_empty_list(X: pd.DataFrame) -> None:
    """``in []`` selects nothing."""
    assert not parse_subgroup("X3 in []", X).any()


def test_between_is_inclusive(X: pd.DataFrame) -> None:
    """``between`` includes both bounds."""
    check("X3 between -1 and 1", X, (X["X3"] >= -1) & (X["X3"] <= 1))
    assert parse_subgroup("X3 between 2 and 2", X).sum() == (X["X3"] == 2).sum() > 0


def test_is_missing(X: pd.DataFrame) -> None:
    """``is missing`` and ``is not missing`` select on missingness, for any dtype."""
    check("x1 is missing", X, X["x1"].isna())
    check("group IS NOT MISSING", X, X["group"].notna())
    check("size is missing", X, X["size"].isna())


def test_ordered_categorical_uses_category_order(X: pd.DataFrame) -> None:
    """Ordering comparisons on an ordered categorical follow the category order."""
    check("size <= 'M'", X, X["size"].isin(["S", "M"]))
    check("size between 'M' and 'L'", X, X["size"].isin(["M", "L"]))


def test_unordered_categorical_equality(X: pd.DataFrame) -> None:
    """Unordered text categoricals support equality and membership."""
    check("color == 'red'", X, X["color"] == "red")
    check("color not in ['red', 'blue']", X, X["color"] == "green")


def test_numeric_categories_compare_numerically(X: pd.DataFrame) -> None:
    """Categoricals with numeric categories compare with numbers."""
    check("level == 2", X, X["level"] == 2)
    check("level >= 2", X, X["level"].isin([2, 3]))


def test_backtick_column_with_space(X: pd.DataFrame) -> None:
    """Backticks quote a column name with a space."""
    check("`petal width` > 1.5", X, X["petal width"] > 1.5)


def test_backtick_escape() -> None:
    """A doubled backtick stands for a backtick in a quoted column name."""
    df = pd.DataFrame({"a`b": [1, 2]})
    check("`a``b` == 2", df, pd.Series([False, True]))


def test_datetime_column_with_iso_date(X: pd.DataFrame) -> None:
    """Datetime columns compare with quoted ISO dates."""
    check("when < '2024-01-05'", X, X["when"] < pd.Timestamp("2024-01-05"))


def test_precedence_and_binds_tighter_than_or(X: pd.DataFrame) -> None:
    """``a or b and c`` means ``a or (b and c)``."""
    a, b, c = X["X3"] == 2, X["flag"], X["x1"] > 0
    check("X3 == 2 or flag == true and x1 > 0", X, a | (b & c))


def test_not_binds_tighter_than_and(X: pd.DataFrame) -> None:
    """``not a and b`` means ``(not a) and b``."""
    check("not X3 == 2 and flag == true", X, (X["X3"] != 2) & X["flag"])


def test_parentheses_override_precedence(X: pd.DataFrame) -> None:
    """Parentheses group as written."""
    a, b, c = X["X3"] == 2, X["flag"], (X["x1"] > 0).fillna(False)
    check("(X3 == 2 or flag == true) and x1 > 0", X, (a | b) & c)
    check("not (X3 == 2 or flag == true)", X, ~(a | b))


def test_keywords_are_case_insensitive(X: pd.DataFrame) -> None:
    """``AND``, ``Or``, ``NOT``, ``IN`` and ``Between`` work in any case."""
    check(
        "NOT X3 IN [0] AnD x1 Between 0 and 1 Or flag == TRUE",
        X,
        (~X["X3"].isin([0]) & (X["x1"] >= 0) & (X["x1"] <= 1)) | X["flag"],
    )


def test_issue_example(X: pd.DataFrame) -> None:
    """The example from the issue selects ``X3 == 0`` rows with ``x1 >= -1.5``."""
    check("X3 == 0 and x1 >= -1.5", X, (X["X3"] == 0) & (X["x1"] >= -1.5))


def test_index_is_preserved(X: pd.DataFrame) -> None:
    """The mask carries the frame's own (string) index."""
    result = parse_subgroup("x1 > 0", X)
    assert result.index.equals(X.index) and result.index[0] == "row0"


def test_non_string_column_labels() -> None:
    """Integer column labels are matched by their string form (in backticks)."""
    df = pd.DataFrame({0: [1, 2, 3], 1: [3, 2, 1]})
    check("`0` >= 2 and `1` >= 2", df, pd.Series([False, True, False]))


def test_duplicate_column_labels_are_ambiguous() -> None:
    """A name that several columns share is rejected."""
    df = pd.DataFrame([[1, 2]], columns=["a", "a"])
    with pytest.raises(SubgroupError, match="ambiguous"):
        parse_subgroup("a == 1", df)


ERRORS = [
    ("", "empty"),
    ("   ", "empty"),
    ("X3 = 0", "use '==' to compare, at character 3"),
    ("x1 > 0 && X3 == 1", "use 'and'"),
    ("x1 > 0 & X3 == 1", "use 'and'"),
    ("x1 > 0 || X3 == 1", "use 'or'"),
    ("x1 > 0 | X3 == 1", "use 'or'"),
    ("!(x1 > 0)", "use 'not'"),
    ("x1 ~ 0", "unexpected character '~'"),
    ("(x1 > 0", "unclosed '('"),
    ("(x1 > 0 X3 == 1)", "expected ')'"),
    ("x1 > 0)", "unmatched ')'"),
    ("X3 in [1, 2", "unclosed '['"),
    ("X3 in [1 2]", "expected ',' or ']'"),
    ("X3 in (1, 2)", "expected '[' to start a list"),
    ("group == 'a", "unclosed quote"),
    ("`petal width > 1", "unclosed backtick"),
    ("x9 > 1", "unknown column 'x9'"),
    ("x3 == 0", "Did you mean 'X3'? Column names are case-sensitive"),
    ("petal width > 1", "backticks, e.g. `petal width`"),
    ("x1 > 0 X3 == 1", "unexpected 'X3' after a complete condition"),
    ("x1 >", "a value is missing after '>'"),
    ("x1 > 0 and", "a column name is missing"),
    ("and x1 > 0", "expected a column name but found 'and'"),
    ("x1 > 0 or or X3 == 1", "expected a column name but found 'or'"),
    ("0 == X3", "expected a column name but found '0'"),
    ("x1 between 1 or 2", "expected 'and' after 'between 1'"),
    ("x1 is nothing", "expected 'missing'"),
    ("x1 == X3", "Quote text values"),
    ("x1 == `X3`", "comparing two columns is not supported"),
    ("x1 == nan", "Use 'column is missing'"),
    ("x1 > 1e", "malformed number"),
    ("x1 == 'abc'", "column 'x1' is numeric; compare it with a number, not the string 'abc'"),
    ("x1 == true", "is numeric; compare it with a number, not true"),
    ("group == 3", "holds text; put the value in quotes, e.g. '3'"),
    ("group < 'b'", "unordered text"),
    ("group between 'a' and 'b'", "unordered text"),
    ("color > 'red'", "unordered text"),
    ("size < 'XL'", "'XL' is not a category of ordered column 'size'"),
    ("level == '2'", "is numeric"),
    ("flag == 'yes'", "is boolean; compare it with true or false"),
    ("x1 between 2 and 1", "the lower bound must come first"),
    ("when == 'soon'", "is not a date"),
    ("when > 3", "holds dates"),
    ("größe > 1", "non-ASCII letters in backticks"),
    ("__import__('os').system('ls')", "unexpected character '.'"),
    ("x1.__class__ == 1", "unknown column 'x1.__class__'"),
]


@pytest.mark.parametrize("condition, message", ERRORS)
def test_errors(X: pd.DataFrame, condition: str, message: str) -> None:
    """Each malformed or ill-typed condition raises SubgroupError with a helpful message."""
    with pytest.raises(SubgroupError, match=re.escape(message)):
        parse_subgroup(condition, X)


@pytest.mark.parametrize(
    "condition, position",
    [
        ("X3 = 0", 3),
        ("(x1 > 0", 0),
        ("x1 > 0 and", 10),
        ("x1 > 0 and x9 < 1", 11),
        ("x1 == 'abc'", 6),
        ("", None),
    ],
)
def test_error_position(X: pd.DataFrame, condition: str, position: int | None) -> None:
    """``SubgroupError.position`` is the 0-based offset of the problem."""
    with pytest.raises(SubgroupError) as info:
        parse_subgroup(condition, X)
    assert info.value.position == position


def test_error_message_quotes_condition(X: pd.DataFrame) -> None:
    """The message repeats the condition text and the character position."""
    with pytest.raises(SubgroupError) as info:
        parse_subgroup("X3 = 0", X)
    assert str(info.value) == "Subgroup 'X3 = 0': use '==' to compare, at character 3."
    assert isinstance(info.value, InputError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "template",
    [
        '__import__("os").system("touch {m}")',
        'x1 == __import__("os").system("touch {m}")',
        "x1 > 0 or exec(\"import os; os.system('touch {m}')\")",
        "`x1` == 1 or @{m}",
    ],
)
def test_injection_does_not_execute(X: pd.DataFrame, tmp_path: Path, template: str) -> None:
    """Python code in a condition is rejected and never run."""
    marker = tmp_path / "pwned_marker"
    with pytest.raises(SubgroupError):
        parse_subgroup(template.format(m=marker), X)
    assert not marker.exists()


AWKWARD_NAMES = ["petal width", "a`b", "and", "Missing", "1st", "größe", "x.y", "it's", "", " "]


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_format_condition_round_trips_awkward_column_names(name: str) -> None:
    """Column names that are not bare identifiers are backtick-quoted and parse back."""
    df = pd.DataFrame({name: [1.0, 2.0, np.nan], "other": [0, 0, 0]})
    check(format_condition(name, ">=", 2), df, df[name] >= 2)


@pytest.mark.parametrize(
    "op, value, expected",
    [
        ("!=", "it's", [False, True, True, False]),
        ("in", ["it's", 'q"uote'], [True, True, False, False]),
        ("not in", ("back\\slash",), [True, True, False, False]),
        ("is missing", None, [False, False, False, True]),
        ("is not missing", None, [True, True, True, False]),
    ],
)
def test_format_condition_round_trips_operators(op: str, value: object, expected: list[bool]) -> None:
    """Every builder operator produces a condition that selects what it describes."""
    df = pd.DataFrame({"s s": pd.Series(["it's", 'q"uote', "back\\slash", None], dtype="str")})
    check(format_condition("s s", op, value), df, pd.Series(expected))


def test_format_condition_between_and_scalars() -> None:
    """``between`` takes a pair; numbers, bools and dates are written as literals."""
    assert format_condition("x", "between", (-1.5, 2)) == "x between -1.5 and 2"
    assert format_condition("flag", "==", np.True_) == "flag == true"
    assert format_condition("when", ">", pd.Timestamp("2024-01-02")) == "when > '2024-01-02T00:00:00'"
    assert format_condition("n", "<", np.int64(3)) == "n < 3"


@pytest.mark.parametrize(
    "op, value, message",
    [
        ("~", 1, "Unknown subgroup operator"),
        ("in", "abc", "needs a list"),
        ("between", (1, 2, 3), "(low, high) pair"),
        ("is missing", 1, "takes no value"),
        ("==", float("nan"), "is missing"),
        ("==", object(), "Cannot use"),
    ],
)
def test_format_condition_errors(op: str, value: object, message: str) -> None:
    """Bad operators or values raise SubgroupError."""
    with pytest.raises(SubgroupError, match=re.escape(message)):
        format_condition("x", op, value)


@settings(max_examples=200, deadline=None)
@given(column=st.text(min_size=1), values=st.lists(st.text(), min_size=1, max_size=5), pick=st.integers(0, 4))
def test_format_condition_text_property(column: str, values: list[str], pick: int) -> None:
    """For any column name and text value, the formatted ``==`` selects ``df[col] == v``."""
    df = pd.DataFrame({column: pd.Series(values, dtype="str")})
    value = values[pick % len(values)]
    check(format_condition(column, "==", value), df, df[column] == value)


@settings(max_examples=200, deadline=None)
@given(number=st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**63), 2**63 - 1)))
def test_format_condition_number_property(number: float | int) -> None:
    """Any finite float or int64 literal survives formatting and parsing exactly."""
    df = pd.DataFrame({"v": pd.Series([number, 0], dtype=type(number))})
    check(format_condition("v", "==", number), df, df["v"] == number)


# --- caps: no visitor input reaches a RecursionError or a multi-second parse ------------------
@pytest.mark.parametrize(
    "condition, cap",
    [
        ("(" * 200 + "x1 > 0" + ")" * 200, "32 nested"),
        ("not " * 3000 + "x1 > 0", "characters"),
        ("not " * 40 + "x1 > 0", "32 nested"),
        (" or ".join(["x1 > 0"] * 20_000), "characters"),
        (" or ".join(["x1 > 0"] * 150), "100 comparisons"),
        ("x1 > 0 and " * 9090 + "x1 > 0", "characters"),
        ("x" * 100_000, "characters"),
    ],
)
def test_caps_give_a_subgroup_error_quickly(condition, cap):
    import time

    import compute.subgroup as sg

    X = pd.DataFrame({"x1": [1.0, -1.0]})
    start = time.perf_counter()
    with pytest.raises(SubgroupError, match=cap):
        sg.parse_subgroup(condition, X)
    assert time.perf_counter() - start < 0.5


def test_conditions_at_the_caps_still_parse():
    import compute.subgroup as sg

    X = pd.DataFrame({"x1": [1.0, -1.0], "x2": [0.0, 2.0]})
    deep = "(" * 31 + "not x1 > 0" + ")" * 31
    assert sg.parse_subgroup(deep, X).tolist() == [False, True]
    many = " or ".join(["x2 > 1"] * 100)
    assert len(many) <= sg.MAX_LENGTH and sg.parse_subgroup(many, X).tolist() == [False, True]


def test_format_condition_refuses_what_the_parser_would_refuse():
    """The condition builder cannot produce a condition over the length cap."""
    from compute.subgroup import MAX_LENGTH, format_condition

    values = list(range(1000))
    with pytest.raises(SubgroupError, match="at most 2,000"):
        format_condition("x1", "in", values)
    assert len(format_condition("x1", "in", values[:300])) <= MAX_LENGTH
