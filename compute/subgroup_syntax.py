"""The syntax of subgroup conditions: limits, tokens, the tokenizer and the recursive-descent
parser that turns a condition into a tree of predicates (grammar in ``compute.subgroup``).
User text is never passed to ``eval``, ``DataFrame.query`` or ``pd.eval``."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compute.errors import SubgroupError

# Caps on what one condition may hold: a condition comes from a URL or a text box, and
# without them nesting reaches Python's recursion limit (RecursionError, not SubgroupError)
# and 20,000 'or' terms cost seconds per request. Far above any condition a person writes.
MAX_LENGTH = 2000  # characters (the dashboard's URL state keeps at most this many)
MAX_DEPTH = 32  # nested parentheses and 'not's
MAX_COMPARISONS = 100  # predicates (comparisons, between, in, is missing)

_KEYWORDS = frozenset({"and", "or", "not", "between", "in", "is", "missing", "true", "false"})
_MISSING_WORDS = frozenset({"nan", "null", "none", "na"})
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ORDERING = frozenset({"<", "<=", ">", ">=", "between"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_SYMBOLS = ("==", "!=", "<=", ">=", "<", ">", "(", ")", "[", "]", ",")  # longest first
_REJECTED = {
    "&&": "use 'and' to combine conditions",
    "&": "use 'and' to combine conditions",
    "||": "use 'or' to combine conditions",
    "|": "use 'or' to combine conditions",
    "=": "use '==' to compare",
    "!": "use 'not' to negate, or '!=' to compare",
}


@dataclass(frozen=True)
class _Token:
    kind: str  # name, column, number, string, op, punct, end
    text: str  # source text (unescaped name for ``column``)
    value: object
    pos: int

    def is_word(self, word: str) -> bool:
        return self.kind == "name" and self.text.lower() == word

    def is_punct(self, symbol: str) -> bool:
        return self.kind == "punct" and self.text == symbol


@dataclass(frozen=True)
class _Predicate:
    column: _Token
    op: str  # a comparison op, between, in, not in, is missing, is not missing
    op_pos: int
    literals: tuple[_Token, ...]


@dataclass(frozen=True)
class _Not:
    operand: _Node


@dataclass(frozen=True)
class _BoolOp:
    op: str  # "and" | "or"
    operands: tuple[_Node, ...]


_Node = _Predicate | _Not | _BoolOp


def _fail(condition: str, detail: str, pos: int | None, hint: str = "") -> SubgroupError:
    where = "" if pos is None else f", at character {pos}"
    return SubgroupError(f"Subgroup {condition!r}: {detail}{where}.{' ' + hint if hint else ''}", position=pos)


def _tokenize(condition: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(condition)
    while i < n:
        ch = condition[i]
        if ch.isspace():
            i += 1
        elif ch in "'\"`":
            end, text = _scan_quoted(condition, i)
            kind = "column" if ch == "`" else "string"
            tokens.append(_Token(kind, text if kind == "column" else condition[i:end], text, i))
            i = end
        elif m := _NUMBER.match(condition, i):
            if m.end() < n and (condition[m.end()].isalnum() or condition[m.end()] in "_."):
                raise _fail(condition, f"malformed number starting {condition[i : m.end() + 1]!r}", i)
            text = m.group()
            value = float(text) if any(c in text for c in ".eE") else int(text)
            tokens.append(_Token("number", text, value, i))
            i = m.end()
        elif m := _IDENTIFIER.match(condition, i):
            tokens.append(_Token("name", m.group(), m.group(), i))
            i = m.end()
        elif symbol := next((s for s in _SYMBOLS if condition.startswith(s, i)), None):
            tokens.append(_Token("op" if symbol in _COMPARE else "punct", symbol, symbol, i))
            i += len(symbol)
        elif rejected := next((s for s in _REJECTED if condition.startswith(s, i)), None):
            raise _fail(condition, _REJECTED[rejected], i)
        else:
            hint = "Quote column names with non-ASCII letters in backticks." if ch.isalpha() else ""
            raise _fail(condition, f"unexpected character {ch!r}", i, hint)
    tokens.append(_Token("end", "", None, n))
    return tokens


def _scan_quoted(condition: str, start: int) -> tuple[int, str]:
    """Scan a quoted string or backtick name at ``start``; return (end, unescaped text)."""
    quote, i, out = condition[start], start + 1, []
    while i < len(condition):
        ch = condition[i]
        if quote == "`" and condition.startswith("``", i):
            out.append("`")
            i += 2
        elif ch == quote:
            return i + 1, "".join(out)
        elif quote != "`" and ch == "\\" and i + 1 < len(condition) and condition[i + 1] in (quote, "\\"):
            out.append(condition[i + 1])
            i += 2
        else:
            out.append(ch)
            i += 1
    raise _fail(condition, "unclosed " + ("backtick" if quote == "`" else "quote"), start)


class _Parser:
    """Recursive-descent parser over the token list; one method per grammar rule."""

    def __init__(self, condition: str) -> None:
        self.condition = condition
        self.tokens = _tokenize(condition)
        self.i = 0
        self.depth = 0
        self.n_predicates = 0

    def parse(self) -> _Node:
        node = self._or()
        tok = self._peek()
        if tok.kind != "end":
            if tok.is_punct(")"):
                raise self._error("unmatched ')'", tok)
            raise self._error(
                f"unexpected {self._show(tok)} after a complete condition", tok, "Join conditions with 'and' or 'or'."
            )
        return node

    def _peek(self) -> _Token:
        return self.tokens[self.i]

    def _next(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def _error(self, detail: str, tok: _Token, hint: str = "") -> SubgroupError:
        return _fail(self.condition, detail, tok.pos, hint)

    @staticmethod
    def _show(tok: _Token) -> str:
        return "the end of the condition" if tok.kind == "end" else repr(tok.text)

    def _or(self) -> _Node:
        return self._chain("or", self._and)

    def _and(self) -> _Node:
        return self._chain("and", self._not)

    def _chain(self, word: str, operand: Callable[[], _Node]) -> _Node:
        nodes = [operand()]
        while self._peek().is_word(word):
            self._next()
            nodes.append(operand())
        return nodes[0] if len(nodes) == 1 else _BoolOp(word, tuple(nodes))

    def _nest(self, tok: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self._error(
                f"more than {MAX_DEPTH} nested parentheses or 'not's (the most a condition may hold)",
                tok,
                "Write the condition with less nesting.",
            )

    def _not(self) -> _Node:
        tok = self._peek()
        if tok.is_word("not"):
            self._next()
            self._nest(tok)
            negated = _Not(self._not())
            self.depth -= 1
            return negated
        if tok.is_punct("("):
            self._next()
            self._nest(tok)
            node = self._or()
            self.depth -= 1
            if not self._peek().is_punct(")"):
                if self._peek().kind == "end":
                    raise self._error("unclosed '('", tok)
                raise self._error(f"expected ')' but found {self._show(self._peek())}", self._peek())
            self._next()
            return node
        return self._predicate()

    def _predicate(self) -> _Predicate:
        self.n_predicates += 1
        if self.n_predicates > MAX_COMPARISONS:
            raise self._error(
                f"more than {MAX_COMPARISONS} comparisons (the most a condition may hold)",
                self._peek(),
                "Use 'in [...]' for many values of one column.",
            )
        col = self._next()
        if col.kind == "end":
            raise self._error("a column name is missing", col)
        if col.kind != "column" and (col.kind != "name" or col.text.lower() in _KEYWORDS):
            raise self._error(
                f"expected a column name but found {self._show(col)}",
                col,
                "Conditions look like `column == value`; quote unusual column names in backticks.",
            )
        tok = self._next()
        if tok.kind == "op":
            return _Predicate(col, tok.text, tok.pos, (self._literal(tok),))
        if tok.is_word("between"):
            low = self._literal(tok)
            if not self._peek().is_word("and"):
                raise self._error(f"expected 'and' after 'between {low.text}'", self._peek())
            high = self._literal(self._next())
            return _Predicate(col, "between", tok.pos, (low, high))
        if tok.is_word("not") and self._peek().is_word("in"):
            self._next()
            return _Predicate(col, "not in", tok.pos, self._list())
        if tok.is_word("in"):
            return _Predicate(col, "in", tok.pos, self._list())
        if tok.is_word("is"):
            negated = self._peek().is_word("not")
            if negated:
                self._next()
            if not self._peek().is_word("missing"):
                raise self._error(f"expected 'missing' but found {self._show(self._peek())}", self._peek())
            self._next()
            return _Predicate(col, "is not missing" if negated else "is missing", tok.pos, ())
        hint = ""
        if tok.kind == "name" and tok.text.lower() not in _KEYWORDS:
            hint = f"Quote column names containing spaces in backticks, e.g. `{col.text} {tok.text}`."
        raise self._error(f"expected a comparison after column {col.text!r} but found {self._show(tok)}", tok, hint)

    def _list(self) -> tuple[_Token, ...]:
        opening = self._next()
        if not opening.is_punct("["):
            raise self._error(f"expected '[' to start a list but found {self._show(opening)}", opening)
        items: list[_Token] = []
        while not self._peek().is_punct("]"):
            if self._peek().kind == "end":
                raise self._error("unclosed '['", opening)
            if items:
                comma = self._next()
                if not comma.is_punct(","):
                    raise self._error(f"expected ',' or ']' but found {self._show(comma)}", comma)
            items.append(self._literal(opening))
        self._next()
        return tuple(items)

    def _literal(self, after: _Token) -> _Token:
        tok = self._next()
        if tok.kind in ("number", "string"):
            return tok
        if tok.is_word("true") or tok.is_word("false"):
            return _Token("bool", tok.text, tok.text.lower() == "true", tok.pos)
        if tok.kind == "end":
            raise self._error(f"a value is missing after {after.text!r}", tok)
        if tok.kind == "name" and tok.text.lower() in _MISSING_WORDS:
            raise self._error(
                f"{tok.text!r} cannot be compared", tok, "Use 'column is missing' or 'column is not missing'."
            )
        if tok.kind == "column":
            raise self._error("comparing two columns is not supported", tok)
        hint = f"Quote text values, e.g. '{tok.text}'." if tok.kind == "name" else ""
        raise self._error(
            f"expected a value (number, quoted string, true or false) but found {self._show(tok)}", tok, hint
        )
