"""Parse subgroup conditions such as ``"X3 == 0 and x1 >= -1.5"`` into row masks.

The condition language is parsed by a small tokenizer and recursive-descent parser of
its own; user text is never passed to ``eval``, ``DataFrame.query`` or ``pd.eval``.
Keywords are case-insensitive; column names are case-sensitive.

Grammar (EBNF)::

    condition  = or_expr ;
    or_expr    = and_expr , { "or" , and_expr } ;
    and_expr   = not_expr , { "and" , not_expr } ;
    not_expr   = "not" , not_expr | "(" , or_expr , ")" | predicate ;
    predicate  = column , ( comp_op , literal
                          | "between" , literal , "and" , literal
                          | [ "not" ] , "in" , "[" , [ literal , { "," , literal } ] , "]"
                          | "is" , [ "not" ] , "missing" ) ;
    comp_op    = "==" | "!=" | "<" | "<=" | ">" | ">=" ;
    column     = identifier | "`" , { ? any character but "`" ? | "``" } , "`" ;
    identifier = ( letter | "_" ) , { letter | digit | "_" | "." } ;   (* ASCII, not a keyword *)
    literal    = number | string | "true" | "false" ;
    number     = [ "-" ] , ( digits , [ "." , [ digits ] ] | "." , digits ) ,
                 [ ( "e" | "E" ) , [ "+" | "-" ] , digits ] ;
    string     = "'" , { ? any character but "'" or "\\" ? | "\\'" | "\\\\" } , "'"
               | '"' , { ? any character but '"' or "\\" ? | '\\"' | "\\\\" } , '"' ;

Keywords (``and or not between in is missing true false``) cannot be bare column
names; quote such columns in backticks. ``between`` is inclusive at both ends.

Semantics of missing values: a comparison, ``between`` or ``in`` never matches a
missing value, ``!=`` and ``not in`` included. ``not`` is the plain complement of its
operand, so ``not x == 1`` does select the rows where ``x`` is missing while
``x != 1`` does not. Use ``x is missing`` / ``x is not missing`` to select on missingness.

Type rules: numeric columns compare with numbers; boolean columns with ``true``/``false``
or numbers (as 1/0); text columns with quoted strings, using ``==``, ``!=``, ``in`` and
``not in`` only; datetime columns with quoted ISO dates. Categorical columns follow the
type of their categories; ordering comparisons on text categories need an ordered
categorical and then follow the category order.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Sequence
from datetime import date
from typing import Any

import numpy as np
import pandas as pd

from compute.errors import InputError, SubgroupError
from compute.subgroup_syntax import (
    _COMPARE,
    _IDENTIFIER,
    _KEYWORDS,
    _ORDERING,
    MAX_LENGTH,  # part of this module's API: the dashboard's URL state keeps at most this many
    _BoolOp,
    _fail,
    _Node,
    _Not,
    _Parser,
    _Predicate,
    _Token,
)
from compute.validation import as_pandas

__all__ = ["format_condition", "parse_subgroup"]


class _Evaluator:
    """Evaluate a parsed condition against the columns of a DataFrame, vectorised."""

    def __init__(self, condition: str, X: pd.DataFrame) -> None:
        self.condition = condition
        self.X = X
        self.positions: dict[str, list[int]] = {}
        for j, c in enumerate(X.columns):
            self.positions.setdefault(str(c), []).append(j)

    def evaluate(self, node: _Node) -> np.ndarray:
        if isinstance(node, _Not):
            return ~self.evaluate(node.operand)
        if isinstance(node, _BoolOp):
            combine = np.logical_and if node.op == "and" else np.logical_or
            return combine.reduce([self.evaluate(child) for child in node.operands])
        return self._predicate(node)

    def _column(self, tok: _Token) -> pd.Series:
        found = self.positions.get(tok.text, [])
        if len(found) > 1:
            raise _fail(self.condition, f"column name {tok.text!r} is ambiguous: {len(found)} columns have it", tok.pos)
        if not found:
            lower = [name for name in self.positions if name.lower() == tok.text.lower()]
            close = lower or difflib.get_close_matches(tok.text, list(self.positions), n=3, cutoff=0.5)
            hint = ("Did you mean " + " or ".join(map(repr, close)) + "?") if close else ""
            if lower:
                hint += " Column names are case-sensitive."
            raise _fail(self.condition, f"unknown column {tok.text!r}", tok.pos, hint)
        return self.X.iloc[:, found[0]]

    def _predicate(self, node: _Predicate) -> np.ndarray:
        s = self._column(node.column)
        if node.op in ("is missing", "is not missing"):
            missing = s.isna().to_numpy(dtype=bool)
            return missing if node.op == "is missing" else ~missing
        if not isinstance(s.dtype, pd.CategoricalDtype):
            return self._compare(node, s, self._kind(node, s))
        codes = s.cat.codes.to_numpy()
        categories = pd.Series(s.cat.categories)
        if s.cat.ordered and node.op in _ORDERING:
            kind = self._kind(node, categories)
            places = []
            for tok in node.literals:
                value = self._coerce(node, kind, tok, categories.dtype)
                if value not in s.cat.categories:
                    listed = ", ".join(map(repr, s.cat.categories[:10].tolist()))
                    raise _fail(
                        self.condition,
                        f"{tok.text} is not a category of ordered column {node.column.text!r} (categories: {listed})",
                        tok.pos,
                    )
                places.append(_Token("number", tok.text, s.cat.categories.get_loc(value), tok.pos))
            node = _Predicate(node.column, node.op, node.op_pos, tuple(places))
            categories = pd.Series(np.arange(len(categories)))
        per_category = self._compare(node, categories, self._kind(node, categories))
        return np.append(per_category, False)[codes]  # code -1 (missing) picks the False

    def _kind(self, node: _Predicate, s: pd.Series) -> str:
        name, dtype = node.column.text, s.dtype
        if pd.api.types.is_object_dtype(dtype):
            inferred = pd.api.types.infer_dtype(s, skipna=True)
            if inferred == "boolean":
                return "bool"
            if inferred in ("integer", "floating", "mixed-integer-float"):
                return "number"
            if inferred in ("string", "empty"):
                return "text"
            raise _fail(
                self.condition,
                f"column {name!r} holds values of mixed types ({inferred}) that cannot be compared",
                node.column.pos,
            )
        if pd.api.types.is_bool_dtype(dtype):
            return "bool"
        if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
            return "number"
        if pd.api.types.is_datetime64_any_dtype(dtype):
            return "datetime"
        if pd.api.types.is_string_dtype(dtype):
            return "text"
        raise _fail(
            self.condition,
            f"column {name!r} has dtype {dtype}, which subgroup conditions do not support",
            node.column.pos,
        )

    def _coerce(self, node: _Predicate, kind: str, tok: _Token, dtype: object) -> Any:
        """Check a literal against the column's kind; return the value to compare with."""
        name, shown = node.column.text, tok.text if tok.kind != "string" else f"the string {tok.text}"
        if tok.kind == "number" and kind in ("number", "bool"):
            return tok.value
        if tok.kind == "bool" and kind == "bool":
            return 1 if tok.value else 0  # boolean columns are compared as Int8 (0/1)
        if kind == "text" and tok.kind == "string":
            return tok.value
        if kind == "datetime" and tok.kind == "string":
            try:
                stamp = pd.Timestamp(tok.value)
            except ValueError:
                stamp = pd.NaT
            if stamp is pd.NaT:
                raise _fail(
                    self.condition,
                    f"{tok.text} is not a date",
                    tok.pos,
                    "Use an ISO date such as '2024-01-31' or '2024-01-31 12:00'.",
                )
            tz = getattr(dtype, "tz", None)
            return stamp.tz_localize(tz) if tz is not None and stamp.tz is None else stamp
        expected = {
            "number": "is numeric; compare it with a number",
            "bool": "is boolean; compare it with true or false",
            "datetime": "holds dates; compare it with a quoted ISO date such as '2024-01-31'",
            "text": f"holds text; put the value in quotes, e.g. '{tok.text}'",
        }[kind]
        raise _fail(self.condition, f"column {name!r} {expected}, not {shown}", tok.pos)

    def _compare(self, node: _Predicate, s: pd.Series, kind: str) -> np.ndarray:
        name, op = node.column.text, node.op
        if kind == "text" and op in _ORDERING:
            raise _fail(
                self.condition,
                f"column {name!r} holds unordered text, so {op!r} cannot be used on it",
                node.op_pos,
                "Use '==', '!=', 'in' or 'not in', or make it an ordered categorical.",
            )
        values = [self._coerce(node, kind, tok, s.dtype) for tok in node.literals]
        if op == "between" and values[0] > values[1]:
            raise _fail(
                self.condition,
                f"'between {node.literals[0].text} and "
                f"{node.literals[1].text}' is empty: the lower bound must come first",
                node.literals[0].pos,
            )
        if kind == "bool":
            s = s.astype("boolean").astype("Int8")
        try:
            if op in _COMPARE:
                result = _COMPARE[op](s, values[0])
            elif op == "between":
                result = (s >= values[0]) & (s <= values[1])
            else:
                result = s.isin(values)
                result = ~result if op == "not in" else result
            mask = pd.Series(result).to_numpy(dtype=bool, na_value=False)
        except (TypeError, ValueError, OverflowError) as exc:
            raise _fail(self.condition, f"cannot apply {op!r} to column {name!r} ({exc})", node.op_pos) from exc
        return mask & s.notna().to_numpy(dtype=bool)


def parse_subgroup(condition: str, X: pd.DataFrame) -> pd.Series:
    """Select the rows of ``X`` that satisfy a subgroup condition.

    Parameters
    ----------
    condition : str
        A condition in the language described in the module docstring, e.g.
        ``"X3 == 0 and x1 >= -1.5"`` or ``"`petal width` between 0.2 and 1"``.
    X : pandas.DataFrame
        The data; column names are matched against ``str(column)``.

    Returns
    -------
    pandas.Series
        Boolean mask aligned with ``X.index`` (dtype ``bool``, no missing values).
        Comparisons never match missing values; see the module docstring.

    Raises
    ------
    SubgroupError
        If the condition is empty or malformed, names an unknown column, compares a
        column with a value of the wrong type, or exceeds a cap: ``MAX_LENGTH``
        characters, ``MAX_DEPTH`` nested parentheses or 'not's, ``MAX_COMPARISONS``
        comparisons. ``position`` is the 0-based offset of
        the problem in ``condition``.
    """
    if not isinstance(condition, str):
        raise SubgroupError(f"The subgroup 'condition' must be a string (got {type(condition).__name__}).")
    if not condition.strip():
        raise SubgroupError("The subgroup 'condition' is empty; write e.g. \"x1 > 0 and group == 'a'\".", position=None)
    X = as_pandas(X)  # a Polars or PyArrow frame: pandas from here on
    if not isinstance(X, pd.DataFrame):
        raise InputError(f"'X' must be a pandas DataFrame (got {type(X).__name__}).")
    if len(condition) > MAX_LENGTH:
        raise SubgroupError(
            f"The subgroup 'condition' has {len(condition):,} characters; at most "
            f"{MAX_LENGTH:,} are allowed (MAX_LENGTH).",
            position=MAX_LENGTH,
        )
    tree = _Parser(condition).parse()
    return pd.Series(_Evaluator(condition, X).evaluate(tree), index=X.index, dtype=bool)


def format_condition(column: Hashable, op: str, value: object = None) -> str:
    """Build a condition string from a condition builder's column, operator and value.

    Parameters
    ----------
    column : Hashable
        Column label; written bare when it is a plain identifier, otherwise in
        backticks (a backtick inside is doubled).
    op : str
        One of ``==, !=, <, <=, >, >=, in, not in, between, is missing, is not missing``.
    value : object, optional
        A number, bool, string or date for comparisons; a sequence of them for
        ``in``/``not in``; a ``(low, high)`` pair for ``between``; ``None`` for the
        missingness operators.

    Returns
    -------
    str
        A condition that :func:`parse_subgroup` parses back to the same selection.

    Raises
    ------
    SubgroupError
        If the operator is unknown, the value does not fit it, or the condition would
        exceed ``MAX_LENGTH`` characters (so what it returns always parses).
    """
    text = _format_condition(column, op, value)
    if len(text) > MAX_LENGTH:
        raise SubgroupError(
            f"The condition would have {len(text):,} characters; at most {MAX_LENGTH:,} are "
            f"allowed (MAX_LENGTH). Use fewer values."
        )
    return text


def _format_condition(column: Hashable, op: str, value: object = None) -> str:
    name = str(column)
    if not (_IDENTIFIER.fullmatch(name) and name.lower() not in _KEYWORDS):
        name = "`" + name.replace("`", "``") + "`"
    op = " ".join(str(op).lower().split())
    if op in _COMPARE:
        return f"{name} {op} {_format_literal(value)}"
    if op in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, set, np.ndarray, pd.Series)):
            raise SubgroupError(f"The 'value' of operator {op!r} needs a list of values (got {value!r}).")
        return f"{name} {op} [{', '.join(_format_literal(v) for v in value)}]"
    if op == "between":
        if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
            raise SubgroupError(f"The 'value' of operator 'between' must be a (low, high) pair (got {value!r}).")
        return f"{name} between {_format_literal(value[0])} and {_format_literal(value[1])}"
    if op in ("is missing", "is not missing"):
        if value is not None:
            raise SubgroupError(f"Operator {op!r} takes no value; leave 'value' as None (got {value!r}).")
        return f"{name} {op}"
    raise SubgroupError(
        f"Unknown subgroup operator {op!r}: the 'op' parameter must be one of "
        "==, !=, <, <=, >, >=, in, not in, between, is missing, is not missing."
    )


def _format_literal(value: object) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            raise SubgroupError(f"The 'value' {value!r} cannot be compared; use 'is missing' for missing values.")
        return repr(float(value))
    if isinstance(value, date):
        value = value.isoformat()
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise SubgroupError(
        f"Cannot use {value!r} ({type(value).__name__}) as a subgroup 'value'; use a number, bool, string or date."
    )
