"""Python 2 to Python 3 source conversion for RPSContest programs (standard library only).

RPSContest programs were written for Python 2. :func:`convert` rewrites the Python 2
idioms such programs use into Python 3 with a small tokenizer of its own, so it does
not depend on ``lib2to3`` (removed in Python 3.13) nor on the strictness of the
running Python's ``tokenize``. Every rewrite stays on its line, so line numbers in
tracebacks are those of the original file. The rules (docs/formats/rpscontest.md):

* ``print x, y`` -> ``print(x, y)``; a trailing comma -> ``end=" "``;
  ``print >>f, x`` -> ``print(x, file=f)``; a bare ``print`` -> ``print()``.
  Unless the file imports ``print_function``.
* ``exec code in g`` -> ``exec(code, g)``; ``raise E, v`` -> ``raise E(v)``;
  ``except E, e:`` -> ``except E as e:``.
* ``/`` keeps Python 2's meaning: ``a / b`` becomes ``a /__py2div__/ b``, which floors
  when both operands are integers and divides exactly otherwise (``/=`` likewise),
  unless the file imports ``division`` from ``__future__``.
* ``xrange`` -> ``range``, ``unicode``/``basestring`` -> ``str``, ``long`` -> ``int``,
  ``unichr`` -> ``chr`` (unless the program binds that name itself: then it keeps its own);
  ``d.has_key(k)`` -> ``d.__contains__(k)``;
  ``.iteritems()``/``.itervalues()``/``.iterkeys()`` -> ``.items()``/``.values()``/``.keys()``;
  ``d.keys()``/``.values()``/``.items()`` -> ``list(d.keys())`` (Python 2 returned lists);
  ``it.next()`` -> ``next(it)``.
* ``<>`` -> ``!=``; backticks -> ``repr(...)``; ``10L`` -> ``10``; ``0777`` -> ``0o777``;
  ``ur"..."`` -> ``r"..."``; ``string.letters``/``lowercase``/``uppercase`` ->
  ``string.ascii_*``; ``sys.maxint`` -> ``sys.maxsize``.
* Indentation: a tab advances to the next multiple of 8 columns (Python 2's rule) and
  every indentation is rewritten with spaces, so mixed tabs and spaces work.

The RPSContest runner (which runs this module inside the sandbox, so it uses the standard
library only) supplies at run time what is not a rewrite: ``__py2div__``, list-returning
``map``/``filter``/``zip``, ``reduce``, ``cmp``, and a ``raw_input`` that explains it
is not available.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

DIVISION_HELPER = "__py2div__"
"""The name the converted source divides through (defined by the runner)."""

RENAMED = {"xrange": "range", "unicode": "str", "basestring": "str", "long": "int", "unichr": "chr"}
METHODS = {"has_key": "__contains__", "iteritems": "items", "itervalues": "values", "iterkeys": "keys"}
LISTED = {"keys", "values", "items"}
ATTRIBUTES = {
    ("string", "letters"): "ascii_letters",
    ("string", "lowercase"): "ascii_lowercase",
    ("string", "uppercase"): "ascii_uppercase",
    ("sys", "maxint"): "maxsize",
}
COMPOUND = {"if", "elif", "else", "for", "while", "try", "except", "finally", "with", "def", "class"}
KEYWORDS = set(keyword.kwlist) | {"print", "exec"}

_OPS = sorted(
    [
        "**=",
        "//=",
        ">>=",
        "<<=",
        "<>",
        "!=",
        "==",
        "<=",
        ">=",
        "**",
        "//",
        ">>",
        "<<",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "&=",
        "|=",
        "^=",
        "->",
        ":=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "&",
        "|",
        "^",
        "~",
        "<",
        ">",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        ";",
        ".",
        "=",
        "@",
        "`",
    ],
    key=len,
    reverse=True,
)
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+[lL]?|0[oO][0-7]+|0[bB][01]+[lL]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[jJ]?[lL]?"
)
_NAME = re.compile(r"[^\W\d]\w*")
_STRING_START = re.compile(r"(?i:ur|br|rb|u|r|b)?('''|\"\"\"|'|\")")


class ConversionError(Exception):
    """The source cannot be converted; the message names the file and the line."""


@dataclass
class _Token:
    kind: str  # NAME NUMBER STRING OP NEWLINE END
    text: str
    line: int
    prefix: str = ""
    """Whitespace, comments, continuations and blank lines before the token."""
    lead: str = ""
    """Text inserted before the token (an opening ``list(``, ``next(``)."""
    tail: str = ""
    """Text inserted after the token (a closing parenthesis, ``print``'s keywords)."""


def _tokenize(source: str, filename: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, line, depth = 0, 1, 0
    opened: list[tuple[str, int]] = []  # open brackets and their lines
    prefix_start = 0
    at_line_start = True  # no token yet in this logical line
    n = len(source)
    while i < n:
        c = source[i]
        if c in " \t\f":
            i += 1
            continue
        if c == "#":
            while i < n and source[i] not in "\r\n":
                i += 1
            continue
        if c == "\\" and source[i + 1 : i + 2] in ("\n", "\r"):
            i += 2 if source[i + 1 : i + 3] != "\r\n" else 3
            line += 1
            continue
        if c in "\r\n":
            end = i + (2 if source[i : i + 2] == "\r\n" else 1)
            if depth == 0 and not at_line_start:
                tokens.append(_Token("NEWLINE", source[i:end], line, source[prefix_start:i]))
                prefix_start = end
                at_line_start = True
            i = end
            line += 1
            continue
        prefix = source[prefix_start:i]
        start_line = line
        m = _STRING_START.match(source, i)
        if m:
            quote = m.group(1)
            j = m.end()
            while True:
                if j >= n:
                    raise ConversionError(f"{filename} line {start_line}: a string starts here and never ends")
                ch = source[j]
                if ch == "\\":
                    if source[j + 1 : j + 2] == "\n":
                        line += 1
                    j += 2
                    continue
                if source.startswith(quote, j):
                    j += len(quote)
                    break
                if ch == "\n":
                    if len(quote) == 1:
                        raise ConversionError(f"{filename} line {start_line}: a string is not closed on its line")
                    line += 1
                j += 1
            tokens.append(_Token("STRING", source[i:j], start_line, prefix))
            i = j
        elif (m := _NUMBER.match(source, i)) and not (c == "." and not source[i + 1 : i + 2].isdigit()):
            tokens.append(_Token("NUMBER", m.group(), line, prefix))
            i = m.end()
        elif m := _NAME.match(source, i):
            tokens.append(_Token("NAME", m.group(), line, prefix))
            i = m.end()
        else:
            op = next((o for o in _OPS if source.startswith(o, i)), None)
            if op is None:
                raise ConversionError(f"{filename} line {line}: unexpected character {c!r}")
            if op in "([{":
                depth += 1
                opened.append((op, line))
            elif op in ")]}":
                if depth == 0:
                    raise ConversionError(f"{filename} line {line}: {op!r} closes a bracket that was never opened")
                depth -= 1
                opened.pop()
            tokens.append(_Token("OP", op, line, prefix))
            i += len(op)
        prefix_start = i
        at_line_start = False
    if opened:
        op, at = opened[-1]
        raise ConversionError(f"{filename} line {at}: this {op!r} is never closed")
    if not at_line_start:
        tokens.append(_Token("NEWLINE", "", line, source[prefix_start:]))
        prefix_start = n
    tokens.append(_Token("END", "", line, source[prefix_start:]))
    return tokens


def _expand_indent(prefix: str) -> str:
    """Rewrite the indentation at the end of ``prefix`` (a logical line's start) with spaces."""
    cut = max(prefix.rfind("\n"), prefix.rfind("\r")) + 1
    head, indent = prefix[:cut], prefix[cut:]
    column = 0
    for ch in indent:
        if ch == "\t":
            column = (column // 8 + 1) * 8
        elif ch == "\f":
            column = 0
        else:
            column += 1
    return head + " " * column


class _Converter:
    def __init__(self, tokens: list[_Token], filename: str) -> None:
        self.t = tokens
        self.filename = filename
        self.match: dict[int, int] = {}
        stack: list[int] = []
        for k, tok in enumerate(tokens):
            if tok.kind == "OP" and tok.text in "([{":
                stack.append(k)
            elif tok.kind == "OP" and tok.text in ")]}":
                opener = stack.pop()
                self.match[k] = opener
                self.match[opener] = k
        imports = self._future_imports()
        self.print_function = "print_function" in imports
        self.true_division = "division" in imports
        self.bound = self._bound_names()
        """Python 2 builtin names the program binds itself (``long = 3``, ``def xrange``): kept as they are."""

    def _bound_names(self) -> set[str]:
        t, found = self.t, set()
        for k, tok in enumerate(t):
            if tok.kind != "NAME" or tok.text not in RENAMED or self._is(k - 1, "."):
                continue
            assigned = self._is(k + 1, "=") and not self._is(k - 1, "(", ",")
            if assigned or self._is(k - 1, "def", "class", "as", "for", "global", "import"):
                found.add(tok.text)
        return found

    def _future_imports(self) -> set[str]:
        found: set[str] = set()
        t = self.t
        for k in range(len(t) - 3):
            if t[k].text == "from" and t[k + 1].text == "__future__" and t[k + 2].text == "import":
                j = k + 3
                while t[j].kind != "NEWLINE" and t[j].kind != "END":
                    if t[j].kind == "NAME":
                        found.add(t[j].text)
                    j += 1
        return found

    def fail(self, k: int, what: str) -> ConversionError:
        return ConversionError(f"{self.filename} line {self.t[k].line}: {what}")

    def _is(self, k: int, *texts: str) -> bool:
        return 0 <= k < len(self.t) and self.t[k].kind in ("OP", "NAME") and self.t[k].text in texts

    def _statement_end(self, k: int) -> int:
        """The index of the token ending the simple statement that contains ``k`` (NEWLINE, ';' or END)."""
        t = self.t
        while not (t[k].kind in ("NEWLINE", "END") or (t[k].kind == "OP" and t[k].text == ";")):
            k = self.match[k] + 1 if t[k].kind == "OP" and t[k].text in "([{" else k + 1
        return k

    def _depth0(self, start: int, end: int, text: str) -> list[int]:
        found, k, t = [], start, self.t
        while k < end:
            if t[k].kind == "OP" and t[k].text in "([{":
                k = self.match[k]
            elif t[k].text == text and t[k].kind in ("OP", "NAME"):
                found.append(k)
            k += 1
        return found

    def statement_starts(self) -> list[int]:
        t = self.t
        starts: list[int] = []
        k = 0
        while k < len(t) and t[k].kind != "END":
            starts.append(k)
            first = t[k]
            header_colon = -1
            if first.kind == "NAME" and first.text in COMPOUND:
                lambdas, j = 0, k
                while t[j].kind not in ("NEWLINE", "END"):
                    if t[j].kind == "OP" and t[j].text in "([{":
                        j = self.match[j]
                    elif t[j].text == "lambda":
                        lambdas += 1
                    elif t[j].kind == "OP" and t[j].text == ":":
                        if lambdas:
                            lambdas -= 1
                        else:
                            header_colon = j
                            break
                    j += 1
            if header_colon >= 0 and t[header_colon + 1].kind not in ("NEWLINE", "END"):
                k = header_colon + 1
                continue
            end = self._statement_end(k)
            if t[end].kind == "OP" and t[end + 1].kind not in ("NEWLINE", "END"):
                k = end + 1
            else:
                while t[k].kind not in ("NEWLINE", "END"):
                    k += 1
                k += 1
        return starts

    def convert_statement(self, k: int) -> None:
        t = self.t
        word = t[k].text if t[k].kind == "NAME" else ""
        nxt = t[k + 1]
        if word == "print" and not self.print_function:
            self._print(k)
        elif word == "exec" and not (nxt.kind == "OP" and nxt.text in ("=", ".", "(")):
            end = self._statement_end(k)
            for j in self._depth0(k + 1, end, "in"):
                t[j].text, t[j].prefix = ",", ""
            t[k].text, t[k + 1].prefix = "exec(", ""
            t[end - 1].tail += ")"
        elif word == "raise":
            end = self._statement_end(k)
            commas = self._depth0(k + 1, end, ",")
            if commas:
                t[commas[0]].text = "("
                t[commas[0] + 1].prefix = ""
                if len(commas) > 1:
                    t[commas[1]].text = ").with_traceback("
                t[end - 1].tail += ")"
        elif word == "except":
            colon = self._depth0(k + 1, self._statement_end(k), ":")
            commas = self._depth0(k + 1, colon[0] if colon else len(t), ",")
            if commas:
                t[commas[0]].text = " as"

    def _print(self, k: int) -> None:
        t = self.t
        end = self._statement_end(k)
        nxt = k + 1
        if nxt == end:
            t[k].text = "print()"
            return
        if t[nxt].kind == "OP" and t[nxt].text in ("=", "."):
            return  # print used as a name
        if t[nxt].kind == "OP" and t[nxt].text == "(" and self.match[nxt] + 1 == end:
            return  # already a call (with one argument, Python 2 printed the same)
        file_text = ""
        first_arg = nxt
        if t[nxt].kind == "OP" and t[nxt].text == ">>":
            commas = self._depth0(nxt + 1, end, ",")
            file_end = commas[0] if commas else end
            if file_end == nxt + 1:
                raise self.fail(nxt, "`print >>` names no file; write `print >>f, value`")
            file_text = "".join(
                (tok.prefix if j > nxt + 1 else "") + tok.text for j, tok in enumerate(t[nxt + 1 : file_end], nxt + 1)
            )
            for j in range(nxt, file_end + (1 if commas else 0)):
                t[j].text = ""
            first_arg = file_end + 1 if commas else end
        trailing = end - 1 >= first_arg and t[end - 1].kind == "OP" and t[end - 1].text == ","
        extras = []
        if trailing:
            extras.append('end=" "')
        if file_text:
            extras.append(f"file={file_text}")
        t[k].text = "print("
        for j in (nxt, first_arg):
            if j < end and "\n" not in t[j].prefix and "\r" not in t[j].prefix:
                t[j].prefix = ""
        has_args = first_arg < end and not (trailing and end - 1 == first_arg)
        if trailing:
            t[end - 1].text = ""
        closing = (", " if has_args and extras else "") + ", ".join(extras) + ")"
        last = max(j for j in range(k, end) if t[j].text)
        t[last].tail += closing

    def _primary_start(self, k: int) -> int | None:
        """The first token of the primary expression that ends at token ``k``."""
        t = self.t
        j = k
        while j >= 0:
            tok = t[j]
            if tok.kind == "OP" and tok.text in ")]}":
                opener = self.match[j]
                before = t[opener - 1] if opener > 0 else None
                if (
                    tok.text != "}"
                    and before is not None
                    and (
                        (before.kind == "NAME" and before.text not in KEYWORDS)
                        or (before.kind == "OP" and before.text in ")]")
                        or before.kind == "STRING"
                    )
                ):
                    j = opener - 1
                    continue
                return opener
            if tok.kind == "NAME" and tok.text not in KEYWORDS:
                if j > 0 and t[j - 1].kind == "OP" and t[j - 1].text == ".":
                    j -= 2
                    continue
                return j
            if tok.kind in ("STRING", "NUMBER"):
                return j
            return None
        return None

    def convert_tokens(self) -> None:
        t = self.t
        backtick_open = False
        for k, tok in enumerate(t):
            after_dot = k > 0 and t[k - 1].kind == "OP" and t[k - 1].text == "."
            if tok.kind == "NAME":
                if after_dot:
                    owner = t[k - 2].text if k > 1 and t[k - 2].kind == "NAME" else ""
                    if (owner, tok.text) in ATTRIBUTES and (k < 3 or t[k - 3].text != "."):
                        tok.text = ATTRIBUTES[(owner, tok.text)]
                    elif tok.text in METHODS and self._is(k + 1, "("):
                        tok.text = METHODS[tok.text]
                    elif tok.text in LISTED and self._is(k + 1, "(") and self._is(k + 2, ")"):
                        start = self._primary_start(k - 2)
                        if start is not None:
                            t[start].lead = "list(" + t[start].lead
                            t[k + 2].tail += ")"
                    elif tok.text == "next" and self._is(k + 1, "(") and self._is(k + 2, ")"):
                        start = self._primary_start(k - 2)
                        if start is not None:
                            t[start].lead = "next(" + t[start].lead
                            t[k - 1].text = tok.text = t[k + 1].text = ""
                elif (
                    tok.text in RENAMED
                    and tok.text not in self.bound
                    and not (self._is(k + 1, "=") and self._is(k - 1, "(", ","))  # not a keyword argument
                ):
                    tok.text = RENAMED[tok.text]
            elif tok.kind == "NUMBER":
                text = tok.text
                if text[-1] in "lL":
                    text = text[:-1]
                if re.fullmatch(r"0[0-7]+", text) and text.strip("0"):
                    text = "0o" + text[1:]
                elif re.fullmatch(r"0\d+", text) and text.strip("0"):
                    raise self.fail(k, f"{tok.text} is not a valid number (a leading 0 means octal in Python 2)")
                tok.text = text
            elif tok.kind == "STRING":
                if tok.text[:2].lower() == "ur":
                    tok.text = tok.text[1:]
            elif tok.kind == "OP":
                if tok.text == "<>":
                    tok.text = "!="
                elif tok.text == "`":
                    tok.text = ")" if backtick_open else "repr("
                    backtick_open = not backtick_open
                elif tok.text == "/" and not self.true_division:
                    tok.text = f"/{DIVISION_HELPER}/"
                elif tok.text == "/=" and not self.true_division:
                    tok.text = f"/= {DIVISION_HELPER} /"
        if backtick_open:
            raise ConversionError(f"{self.filename}: a backtick (`) is never closed")

    def render(self) -> str:
        out: list[str] = []
        line_start = True
        for tok in self.t:
            prefix = _expand_indent(tok.prefix) if line_start and tok.kind not in ("END",) else tok.prefix
            out.append(prefix + tok.lead + tok.text + tok.tail)
            line_start = tok.kind == "NEWLINE"
        return "".join(out)


def convert(source: str, filename: str = "program.py") -> str:
    """Python 3 source for the Python 2 program ``source``, line for line.

    Args:
        source: The program's text.
        filename: The name used in error messages.

    Returns:
        The converted source; it compiles under Python 3.

    Raises:
        ConversionError: The program cannot be converted or does not compile after
            conversion; the message names the line, and quotes it for a syntax error.
    """
    if source.startswith("\ufeff"):
        source = source[1:]
    tokens = _tokenize(source, filename)
    converter = _Converter(tokens, filename)
    for k in reversed(converter.statement_starts()):
        converter.convert_statement(k)
    converter.convert_tokens()
    result = converter.render()
    try:
        compile(result, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        lines = source.splitlines()
        number = exc.lineno or 0
        quoted = f": {lines[number - 1].strip()!r}" if 0 < number <= len(lines) else ""
        raise ConversionError(
            f"{filename} line {number}: {exc.msg}{quoted} "
            "(after conversion from Python 2; docs/formats/rpscontest.md lists what is converted)"
        ) from None
    return result
