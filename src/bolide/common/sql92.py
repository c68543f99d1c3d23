"""RocketMQ's SQL92 message selector (``MessageSelector.bySql``): parse an expression once,
then match it against a message's properties (all strings), as the broker's filter does.

::

    selector = compile_selector("region = 'eu' AND price > 10 AND kind IN ('a', 'b')")
    selector.matches({"region": "eu", "price": "12", "kind": "a"})  # True

The grammar and the results are RocketMQ's (``SelectorParser.jj`` and the expression classes
of ``rocketmq-filter``): ``AND``, ``OR``, ``NOT``; ``=``, ``<>``, ``>``, ``>=``, ``<``, ``<=``;
``[NOT] BETWEEN a AND b``; ``[NOT] IN ('x', ...)``; ``IS [NOT] NULL``; ``[NOT] CONTAINS``,
``STARTSWITH``, ``ENDSWITH`` with a string; literals ``'text'`` (``''`` for a quote), integers
(``10``, ``10L``), decimals (``1.5``, ``1e3``), ``TRUE``, ``FALSE``, ``NULL``; keywords in any
case. A property compared with a number is read as that number's type (Java's Integer, Long or
Double); two properties compared by ``<`` and the like are read as doubles. A missing property
is NULL and makes a comparison unknown: the message does not match. A value that cannot be
converted (``price > 10`` with ``price='ten'``) makes the whole expression fail for that
message, which then does not match either.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bolide.errors import BolideError

MAX_LENGTH = 16 * 1024  # characters of one expression
MAX_DEPTH = 100  # nesting of parentheses and operators
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


class SelectorError(BolideError):
    """The expression is not a valid SQL92 selector; the message says where and why."""


class _EvalError(Exception):
    """A value could not be converted: the message does not match."""


# -- values: None (NULL), bool, _Long / int (Java Integer), float (Double), str -------------
class _Long(int):
    """An integer of Java type Long (a literal outside the int range, or converted to it)."""


def _java_class(v: object) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, _Long):
        return "long"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    return "str"


_INT_TEXT = re.compile(r"[+-]?\d+")
_DOUBLE_TEXT = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?")


def _to_int(text: str, bounds: tuple[int, int]) -> int:
    """Java Integer.valueOf / Long.valueOf: digits with a sign, within range."""
    if not _INT_TEXT.fullmatch(text):
        raise _EvalError(f"{text!r} is not an integer")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise _EvalError(f"{text!r} is out of range")
    return value


def _to_double(text: str) -> float:
    """Java Double.valueOf (decimal forms, NaN, Infinity, surrounding blanks)."""
    trimmed = text.strip(" \t\n\r\f\v\x00")
    if not _DOUBLE_TEXT.fullmatch(trimmed):
        raise _EvalError(f"{text!r} is not a number")
    trimmed = trimmed.rstrip("fFdD") if not trimmed.endswith("Infinity") else trimmed
    return float(trimmed.replace("Infinity", "inf").replace("NaN", "nan"))


def _convert(value: object, to: str) -> object:
    """A property string read as the type ``to`` of the value it is compared with."""
    assert isinstance(value, str)
    if to == "bool":
        return value.lower() == "true"
    if to == "int":
        return _to_int(value, INT32)
    if to == "long":
        return _Long(_to_int(value, INT64))
    return _to_double(value)


def _compare(lv: object, rv: object) -> int:
    """Java's ComparisonExpression.__compare with string conversion on (NaN compares only
    approximately as Java's Double.compareTo does; it is rare in properties)."""
    lc, rc = _java_class(lv), _java_class(rv)
    if lc != rc:
        if lc == "bool":
            if rc == "str":
                raise _EvalError("a boolean cannot be compared with a string")
            return -1
        if lc == "str":
            lv = _convert(lv, rc)
        elif rc == "str":
            rv = _convert(rv, lc)
        elif rc == "bool":
            return -1
        # int, long and double: compared as numbers (Java widens the narrower one)
    if lv == rv:
        return 0
    return -1 if lv < rv else 1  # type: ignore[operator]  # same kinds once converted


def _java_equals(lv: object, rv: object) -> bool:
    return _java_class(lv) == _java_class(rv) and lv == rv


# -- expression nodes ----------------------------------------------------------------------
Props = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class _Node:
    evaluate: Callable[[Props], object]
    boolean: bool = False  # a BooleanExpression (may stand where a condition is expected)
    constant: bool = False
    value: object = None  # of a constant
    prop: str | None = None  # of a property reference
    text: str = ""
    depth: int = 1  # nesting of evaluate calls (bounded: evaluation recurses)

    def __str__(self) -> str:
        return self.text


def _nested(*children: _Node) -> int:
    """The depth of a node over ``children``; SelectorError past MAX_DEPTH."""
    depth = 1 + max(c.depth for c in children)
    if depth > MAX_DEPTH:
        raise SelectorError(f"the expression nests deeper than {MAX_DEPTH} levels")
    return depth


def _constant(value: object, text: str, boolean: bool = False) -> _Node:
    return _Node(lambda _p: value, boolean=boolean, constant=True, value=value, text=text)


def _as_condition(node: _Node) -> _Node:
    if node.boolean:
        return node
    if node.prop is not None:  # a bare property: TRUE only if it were a boolean (never: a string)
        name = node.prop

        def cast(p: Props) -> object:
            return None if p.get(name) is None else False
        return _Node(cast, boolean=True, text=name, depth=2)
    raise SelectorError(f"Expression will not result in a boolean value: {node}")


def _chain(terms: list[_Node], decisive: bool) -> _Node:
    """``a AND b AND ...`` (``decisive`` False) or ``a OR b OR ...`` (True): the terms in order,
    as Java's left-nested operators evaluate them; the first term equal to ``decisive`` decides,
    else unknown if any term is unknown, else ``not decisive``."""
    def evaluate(p: Props) -> object:
        unknown = False
        for term in terms:
            v = term.evaluate(p)
            if v is decisive:
                return decisive
            unknown = unknown or v is None
        return None if unknown else not decisive
    joiner = " OR " if decisive else " AND "
    return _Node(evaluate, boolean=True, text=joiner.join(f"({t})" for t in terms),
                 depth=_nested(*terms))


def _all(terms: list[_Node]) -> _Node:
    return _chain(terms, False)


def _any(terms: list[_Node]) -> _Node:
    return _chain(terms, True)


def _not(a: _Node) -> _Node:
    def evaluate(p: Props) -> object:
        v = a.evaluate(p)
        return None if v is None else v is not True
    return _Node(evaluate, boolean=True, text=f"NOT ({a})", depth=_nested(a))


def _equal(a: _Node, b: _Node) -> _Node:
    def evaluate(p: Props) -> object:
        lv, rv = a.evaluate(p), b.evaluate(p)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or _java_equals(lv, rv):
            return True
        return _compare(lv, rv) == 0
    return _Node(evaluate, boolean=True, text=f"{a} = {b}", depth=_nested(a, b))


_ORDER = {">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_orderable(node: _Node) -> None:
    """Only numbers and properties go on either side of ``<`` and the like."""
    if (node.constant and not _is_number(node.value)) or node.boolean:
        raise SelectorError(f"Value '{node}' cannot be compared.")


def _ordering(op: str, a: _Node, b: _Node) -> _Node:
    _check_orderable(a)
    _check_orderable(b)
    test = _ORDER[op]

    def evaluate(p: Props) -> object:
        lv = a.evaluate(p)
        if lv is None:
            return None
        rv = b.evaluate(p)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            return test(_compare(_to_double(lv), _to_double(rv)))
        return test(_compare(lv, rv))
    return _Node(evaluate, boolean=True, text=f"{a} {op} {b}", depth=_nested(a, b))


def _string_test(a: _Node, search: str, test: Callable[[str, str], bool], negate: bool, name: str) -> _Node:
    def evaluate(p: Props) -> object:
        if not search:
            return False
        v = a.evaluate(p)
        if not isinstance(v, str):
            return False
        return test(v, search) != negate
    return _Node(evaluate, boolean=True, text=f"{a} {'NOT ' if negate else ''}{name} '{search}'",
                 depth=_nested(a))


def _in(a: _Node, values: list[str], negate: bool) -> _Node:
    if a.prop is None:
        raise SelectorError(f"Expected a property for In expression, got: {a}")
    allowed = frozenset(values)

    def evaluate(p: Props) -> object:
        v = a.evaluate(p)
        if not isinstance(v, str):
            return None
        return (v in allowed) != negate
    return _Node(evaluate, boolean=True, text=f"{a} {'NOT ' if negate else ''}IN {sorted(allowed)}",
                 depth=_nested(a))


def _negate(a: _Node) -> _Node:
    if a.constant and _is_number(a.value):
        value = a.value
        negated = _Long(-value) if isinstance(value, _Long) else -value
        return _constant(negated, f"-{a}")

    def evaluate(p: Props) -> object:
        v = a.evaluate(p)
        if v is None:
            return None
        if _is_number(v):
            return -v  # type: ignore[operator]
        raise _EvalError(f"cannot negate {v!r}")
    return _Node(evaluate, text=f"-{a}", depth=_nested(a))


# -- tokens and parser ---------------------------------------------------------------------
_KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
                       "CONTAINS", "STARTSWITH", "ENDSWITH"})
_TOKEN = re.compile(r"""
    (?P<space>[ \t\n\r\f]+)
  | (?P<string>'(?:''|[^'])*')
  | (?P<float>(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+))
  | (?P<int>(?:0|[1-9]\d*)[lL]?)
  | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
""", re.VERBOSE)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # string, float, int, word, keyword, op, end
    text: str
    pos: int


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SelectorError(f"unexpected character {text[pos]!r} at {pos} in {text!r}")
        kind = m.lastgroup or ""
        if kind != "space":
            word = m.group()
            if kind == "word" and word.upper() in _KEYWORDS:
                kind, word = "keyword", word.upper()
            out.append(_Token(kind, word, pos))
        pos = m.end()
    out.append(_Token("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0

    # -- token helpers --
    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def at(self, *words: str) -> bool:
        t = self.peek()
        return t.kind in ("keyword", "op") and t.text in words

    def take(self, word: str) -> _Token:
        t = self.peek()
        if t.kind not in ("keyword", "op") or t.text != word:
            self.fail(f"expected {word}")
        self.i += 1
        return t

    def fail(self, what: str) -> None:
        t = self.peek()
        found = "the end" if t.kind == "end" else repr(t.text)
        raise SelectorError(f"{what} at {t.pos}, found {found}, in {self.text!r}")

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SelectorError(f"the expression nests deeper than {MAX_DEPTH} levels")

    # -- grammar --
    def selector(self) -> _Node:
        node = _as_condition(self.or_expr())
        if self.peek().kind != "end":
            self.fail("unexpected token")
        return node

    def or_expr(self) -> _Node:
        self.deeper()
        terms = [self.and_expr()]
        while self.at("OR"):
            self.i += 1
            terms.append(self.and_expr())
        self.depth -= 1
        return terms[0] if len(terms) == 1 else _any([_as_condition(t) for t in terms])

    def and_expr(self) -> _Node:
        terms = [self.equality()]
        while self.at("AND"):
            self.i += 1
            terms.append(self.equality())
        return terms[0] if len(terms) == 1 else _all([_as_condition(t) for t in terms])

    def equality(self) -> _Node:
        left = self.comparison()
        while True:
            if self.at("=", "<>"):
                op = self.take(self.peek().text).text
                right = self.comparison()
                for side in (left, right):
                    if side.constant and side.value is None:
                        raise SelectorError(f"'{side}' cannot be compared.")
                if left.constant and right.constant and left.boolean and not right.boolean:
                    raise SelectorError(f"'{left}' cannot be compared with '{right}'")
                left = _equal(left, right) if op == "=" else _not(_equal(left, right))
            elif self.at("IS"):
                self.i += 1
                negate = self.at("NOT")
                if negate:
                    self.i += 1
                self.take("NULL")
                is_null = _equal(left, _constant(None, "NULL", boolean=True))
                left = _not(is_null) if negate else is_null
            else:
                return left

    def comparison(self) -> _Node:
        left = self.unary()
        while True:
            t = self.peek()
            negate = t.kind == "keyword" and t.text == "NOT" and self.peek(1).text in (
                "CONTAINS", "STARTSWITH", "ENDSWITH", "BETWEEN", "IN")
            word = self.peek(1).text if negate else t.text
            if t.kind == "op" and t.text in _ORDER:
                self.i += 1
                left = _ordering(t.text, left, self.unary())
            elif word in ("CONTAINS", "STARTSWITH", "ENDSWITH") and (negate or t.kind == "keyword"):
                self.i += 2 if negate else 1
                search = self.string()
                test = {"CONTAINS": str.__contains__, "STARTSWITH": str.startswith,
                        "ENDSWITH": str.endswith}[word]
                left = _string_test(left, search, test, negate, word)
            elif word == "BETWEEN" and (negate or t.kind == "keyword"):
                self.i += 2 if negate else 1
                low = self.unary()
                self.take("AND")
                high = self.unary()
                left = self.between(left, low, high, negate)
            elif word == "IN" and (negate or t.kind == "keyword"):
                self.i += 2 if negate else 1
                self.take("(")
                values = [self.string()]
                while self.at(","):
                    self.i += 1
                    values.append(self.string())
                self.take(")")
                left = _in(left, values, negate)
            else:
                return left

    @staticmethod
    def between(value: _Node, low: _Node, high: _Node, negate: bool) -> _Node:
        if low.constant and high.constant:
            if low.value is None or high.value is None:
                raise SelectorError("Illegal values of between, values can not be null!")
            try:
                backwards = _compare(high.value, low.value) < 0
            except _EvalError as exc:
                raise SelectorError(f"Illegal values of between: {exc}") from None
            if backwards:
                raise SelectorError(f"Illegal values of between, left value({low}) must less than "
                                    f"or equal to right value({high})")
        if negate:
            return _any([_ordering("<", value, low), _ordering(">", value, high)])
        return _all([_ordering(">=", value, low), _ordering("<=", value, high)])

    def unary(self) -> _Node:
        self.deeper()
        if self.at("+"):
            self.i += 1
            node = self.unary()
        elif self.at("-"):
            self.i += 1
            node = _negate(self.unary())
        elif self.at("NOT"):
            self.i += 1
            node = _not(_as_condition(self.unary()))
        else:
            node = self.primary()
        self.depth -= 1
        return node

    def primary(self) -> _Node:
        t = self.peek()
        if t.kind == "op" and t.text == "(":
            self.i += 1
            node = self.or_expr()
            self.take(")")
            return node
        if t.kind == "word":
            self.i += 1
            name = t.text
            return _Node(lambda p: p.get(name), prop=name, text=name)
        if t.kind == "string":
            return _constant(self.string(), t.text)
        if t.kind == "int":
            self.i += 1
            value = int(t.text.rstrip("lL"))
            if not INT64[0] <= value <= INT64[1]:
                raise SelectorError(f"{t.text} is out of the long range")
            return _constant(value if INT32[0] <= value <= INT32[1] else _Long(value), t.text)
        if t.kind == "float":
            self.i += 1
            value = float(t.text)
            if not 5e-324 <= value <= 1.7976931348623157e308:  # Java's Double.MIN_VALUE, MAX_VALUE
                raise SelectorError(f"{t.text} is outside Java's positive double range")
            return _constant(value, t.text)
        if t.kind == "keyword" and t.text in ("TRUE", "FALSE", "NULL"):
            self.i += 1
            return _constant({"TRUE": True, "FALSE": False, "NULL": None}[t.text], t.text, boolean=True)
        self.fail("expected a value, a property or '('")
        raise AssertionError  # not reached

    def string(self) -> str:
        t = self.peek()
        if t.kind != "string":
            self.fail("expected a string literal")
        self.i += 1
        return t.text[1:-1].replace("''", "'")


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled SQL92 expression."""

    expression: str
    _root: _Node

    def matches(self, properties: Props) -> bool:
        """Whether a message with these properties is selected (unknown or failing: no)."""
        try:
            return self._root.evaluate(properties) is True
        except (_EvalError, ArithmeticError, ValueError, TypeError, RecursionError):
            return False


def compile_selector(expression: str) -> Selector:
    """Parse ``expression``; SelectorError names what is wrong and where."""
    if not expression or not expression.strip():
        raise SelectorError("the SQL92 expression is empty")
    if len(expression) > MAX_LENGTH:
        raise SelectorError(f"the SQL92 expression is longer than {MAX_LENGTH} characters")
    return Selector(expression, _Parser(expression).selector())


class SelectorCache:
    """Compiled selectors by expression, the most recent ``size`` kept (errors too)."""

    def __init__(self, size: int = 100) -> None:
        self.size = size
        self._items: OrderedDict[str, Selector | SelectorError] = OrderedDict()

    def get(self, expression: str) -> Selector:
        """The compiled ``expression``; raises its SelectorError."""
        item = self._items.get(expression)
        if item is None:
            try:
                item = compile_selector(expression)
            except SelectorError as exc:
                item = exc
            self._items[expression] = item
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(expression)
        if isinstance(item, SelectorError):
            raise item
        return item
