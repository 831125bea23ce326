"""Avro encoders generated from the event schemas as Python source: for ``exec``, or as a module to compile.

``ledger.log.avro_encode`` turns each record schema, once at first use, into the source of a plain
Python function that writes its fields in schema order with no interpretation left, and compiles
that source with ``exec``: it runs interpreted in either build. The same generator, ``typed``,
writes the branches of the log's union as a module (``module_source``) with the types mypyc needs to
compile them; the build writes it to ``ledger/log/avro_records.py`` from ``schemas/*.avsc`` before
compiling (``setup.py``), never by hand. The module records ``DIGEST``, the sha256 of its code, and
``avro_encode`` uses it only while the schemas it is given generate that very code.

This module imports nothing of gpuledger: the build loads it by its path, before the package (and
fastavro, which the package needs) can be imported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = ["Compiler", "describe", "module_digest", "module_source", "nullable"]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_COMPLEX = {"record", "error", "enum", "fixed", "array", "map"}
TIMESTAMP_SCALE = {"timestamp-micros": 1, "timestamp-millis": 1000}


def _varint_literal(n: int) -> bytes:
    """Return the varint bytes of an unsigned n, for constants written into the generated code."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class Compiler:
    """Turn schemas into Python source: one function per named record, one per union branch."""

    def __init__(self, *, typed: bool = False) -> None:
        # typed: annotate what mypyc needs to compile the code (the records, the strings and whole
        # numbers read from them) and never rebind a variable to another type
        self.typed = typed
        self.named: dict[str, Any] = {}  # full name -> schema dict (records, enums, fixed)
        self.constants: dict[str, Any] = {}  # tables the generated code reads (enum symbols, defaults)
        self.functions: dict[str, list[str]] = {}  # function name -> its source lines
        self._vars = 0

    # names ----------------------------------------------------------------------------------------
    @staticmethod
    def full_name(schema: dict[str, Any], namespace: str) -> str:
        name = str(schema["name"])
        if "." in name:
            return name
        space = schema.get("namespace", namespace)
        return f"{space}.{name}" if space else name

    def constant(self, value: Any, hint: str) -> str:
        name = f"_{hint}_{len(self.constants)}"
        self.constants[name] = value
        return name

    def fresh(self) -> str:
        self._vars += 1
        return f"v{self._vars}"

    def resolve(self, schema: Any, namespace: str) -> tuple[Any, str]:
        """Return (schema, namespace) with a named reference replaced by its definition; register definitions."""
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return {"type": schema}, namespace
            full = schema if schema in self.named else f"{namespace}.{schema}" if namespace else schema
            if full not in self.named:
                raise ValueError(f"unknown Avro type {schema!r}")
            target = self.named[full]
            return target, full.rpartition(".")[0]
        if isinstance(schema, list):
            return schema, namespace
        kind = schema["type"]
        if isinstance(kind, dict | list) or kind not in _PRIMITIVES | _COMPLEX:  # {"type": <a type>}
            return self.resolve(kind, namespace)
        if kind in ("record", "error", "enum", "fixed"):
            full = self.full_name(schema, namespace)
            self.named.setdefault(full, schema)
            return schema, full.rpartition(".")[0]
        return schema, namespace

    # values ---------------------------------------------------------------------------------------
    def value(self, schema: Any, namespace: str, var: str, indent: str) -> list[str]:
        """Return lines that append the encoding of ``var`` (typed ``schema``) to ``out``."""
        schema, namespace = self.resolve(schema, namespace)
        if isinstance(schema, list):
            return self.union(schema, namespace, var, indent)
        kind = schema["type"]
        logical = schema.get("logicalType")
        i = indent
        if logical is not None and not (logical in TIMESTAMP_SCALE and kind == "long"):
            raise ValueError(f"the compiled Avro encoder does not support logicalType {logical!r} on {kind}")
        if kind == "null":
            return [f"{i}if {var} is not None: raise _not_a('null', {var})"]
        if kind == "boolean":
            return [f"{i}out += _BOOL[{var}]"]  # a KeyError for anything but True/False (or 1/0)
        if logical is not None:
            # Events carry many equal times (a decision, the start it causes, its effective time),
            # so the bytes of recent times are kept; _time_bytes refuses what fastavro would misread.
            cache = "_MICROS" if logical == "timestamp-micros" else "_MILLIS"
            return [
                f"{i}{var}_b = {cache}.get({var})",
                f"{i}out += {var}_b if {var}_b is not None else _time_bytes({var}, {TIMESTAMP_SCALE[logical]})",
            ]
        if kind in ("int", "long"):
            low, high = (INT_MIN, INT_MAX) if kind == "int" else (LONG_MIN, LONG_MAX)
            return [
                # Most numbers are small and not negative: one byte, and a TypeError for a str or None.
                f"{i}if 0 <= {var} < 64: out.append({var} << 1)",
                f"{i}else:",
                f"{i}    if not {low} <= {var} <= {high}: raise _range({kind!r})",
                f"{i}    out += _varint(({var} << 1) ^ ({var} >> 63))",  # zig-zag: the sign to the lowest bit
            ]
        if kind == "float":
            return [f"{i}out += _float({var})"]
        if kind == "double":
            return [f"{i}out += _double({var})"]
        if kind in ("string", "bytes"):
            data = f"{var}_u" if self.typed and kind == "string" else var  # typed: the str keeps its type
            if kind == "string":
                head = [f"{i}{data} = {var}.encode()"]  # UnicodeEncodeError for a lone surrogate
            else:
                head = [f"{i}if not isinstance({var}, bytes | bytearray): raise _not_a('bytes', {var})"]
            n = self.fresh()
            return [
                *head,
                f"{i}{n} = len({data})",
                f"{i}if {n} < 64: out.append({n} << 1)",
                f"{i}else: out += _varint({n} << 1)",
                f"{i}out += {data}",
            ]
        if kind == "fixed":
            size = int(schema["size"])
            return [
                f"{i}if not isinstance({var}, bytes | bytearray) or len({var}) != {size}: "
                f"raise _not_a('{size} bytes', {var})",
                f"{i}out += {var}",
            ]
        if kind == "enum":
            table = self.constant({s: _varint_literal(k << 1) for k, s in enumerate(schema["symbols"])}, "ENUM")
            return [f"{i}out += {table}[{var}]"]  # a KeyError for a symbol the enum lacks
        if kind == "array":
            item = self.fresh()
            return [
                f"{i}if {var}.__class__ is not list and {var}.__class__ is not tuple: raise _not_a('a list', {var})",
                f"{i}if {var}:",
                f"{i}    out += _varint(len({var}) << 1)",
                f"{i}    for {item} in {var}:",
                *self.value(schema["items"], namespace, item, i + "        "),
                f"{i}out.append(0)",
            ]
        if kind == "map":
            key, val = self.fresh(), self.fresh()
            return [
                f"{i}if not isinstance({var}, dict): raise _not_a('a dict', {var})",
                f"{i}if {var}:",
                f"{i}    out += _varint(len({var}) << 1)",
                f"{i}    for {key}, {val} in {var}.items():",
                *self.value({"type": "string"}, namespace, key, i + "        "),
                *self.value(schema["values"], namespace, val, i + "        "),
                f"{i}out.append(0)",
            ]
        if kind in ("record", "error"):
            return [f"{i}{self.record_function(schema, namespace)}({var}, out)"]
        raise ValueError(f"the compiled Avro encoder does not support Avro type {kind!r}")

    def union(self, branches: list[Any], namespace: str, var: str, indent: str) -> list[str]:
        """Lines for a union: the first branch whose Python type test the value passes, as fastavro picks."""
        tests = []
        records = 0
        for index, branch in enumerate(branches):
            schema, space = self.resolve(branch, namespace)
            if isinstance(schema, list):
                raise ValueError("a union directly inside a union is not valid Avro")
            kind = schema["type"]
            records += kind in ("record", "error")
            tests.append((index, self.test(schema, var), schema, space))
        if records > 1:
            raise ValueError("the compiled Avro encoder does not support unions of several records")
        # fastavro prefers double to float for a Python float whichever comes first.
        kinds = [t[2]["type"] for t in tests]
        if "float" in kinds and "double" in kinds:
            tests = [t for t in tests if t[2]["type"] != "float"] + [t for t in tests if t[2]["type"] == "float"]
        lines = []
        for n, (index, test, schema, space) in enumerate(tests):
            lines.append(f"{indent}{'if' if n == 0 else 'elif'} {test}:")
            lines.append(f"{indent}    out += {_varint_literal(index << 1)!r}")
            if schema["type"] != "null":
                lines += self.value(schema, space, var, indent + "    ")
        names = [t[2].get("name", t[2]["type"]) for t in tests]
        lines.append(f"{indent}else: raise _not_a({' or '.join(map(str, names))!r}, {var})")
        return lines

    def test(self, schema: dict[str, Any], var: str) -> str:
        """Return a Python expression telling whether ``var`` belongs to this union branch (fastavro's rule)."""
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical in TIMESTAMP_SCALE:
            return f"(({var}.__class__ is not bool and isinstance({var}, int)) or isinstance({var}, _datetime))"
        if kind == "enum":
            symbols = self.constant(frozenset(schema["symbols"]), "SYMBOLS")
            return f"(isinstance({var}, str) and {var} in {symbols})"
        if kind == "fixed":
            return f"(isinstance({var}, bytes | bytearray) and len({var}) == {int(schema['size'])})"
        return {
            "null": f"{var} is None",
            "boolean": f"isinstance({var}, bool)",
            # a bool is an int to Python but no number to fastavro's union resolution
            "int": f"({var}.__class__ is not bool and isinstance({var}, int) and _IMIN <= {var} <= _IMAX)",
            "long": f"({var}.__class__ is not bool and isinstance({var}, int) and _LMIN <= {var} <= _LMAX)",
            "float": f"({var}.__class__ is not bool and isinstance({var}, int | float))",
            "double": f"({var}.__class__ is not bool and isinstance({var}, int | float))",
            "string": f"isinstance({var}, str)",
            "bytes": f"isinstance({var}, bytes | bytearray)",
            "array": f"isinstance({var}, list | tuple)",
            "map": f"isinstance({var}, dict)",
            "record": f"isinstance({var}, dict)",
            "error": f"isinstance({var}, dict)",
        }[kind]

    # records --------------------------------------------------------------------------------------
    def fields(self, schema: dict[str, Any], namespace: str, indent: str) -> list[str]:
        """Lines writing every field of record ``r`` in schema order."""
        lines = []
        for field in schema["fields"]:
            name = field["name"]
            var = self.fresh()
            lines.append(f"{indent}# {name}: {describe(field['type'])}")
            target = var + self.annotation(field["type"], namespace)
            if "default" in field:
                # fastavro writes a field's default when the record lacks it.
                default = self.constant(field["default"], "DEFAULT")
                lines.append(f"{indent}{target} = r.get({name!r}, {default})")
            elif nullable(field["type"]):
                lines.append(f"{indent}{target} = r.get({name!r})")  # fastavro: a missing nullable field is null
            else:
                lines.append(f"{indent}{target} = r[{name!r}]")
            lines += self.value(field["type"], namespace, var, indent)
        return lines

    def annotation(self, schema: Any, namespace: str) -> str:
        """Return the annotation of a field's variable in typed code: str or int where the type is exactly that."""
        if not self.typed:
            return ""
        resolved, _ = self.resolve(schema, namespace)
        if isinstance(resolved, list) or resolved.get("logicalType") is not None:
            return ""
        return {"string": ": str", "int": ": int", "long": ": int"}.get(resolved["type"], "")

    def signature(self, fn: str) -> str:
        """Return the def line of a function writing one record ``r`` to ``out``."""
        if self.typed:
            return f"def {fn}(r: dict[str, Any], out: bytearray) -> None:"
        return f"def {fn}(r, out):"

    def record_function(self, schema: dict[str, Any], namespace: str) -> str:
        """Return the name of the function that writes this record, generating it the first time."""
        full = self.full_name(schema, namespace)
        fn = "record_" + full.replace(".", "_")
        if fn not in self.functions:
            self.functions[fn] = []  # reserved first: a recursive record refers to itself
            body = self.fields(schema, full.rpartition(".")[0], "    ")
            self.functions[fn] = [
                self.signature(fn),
                f'    """Append the Avro encoding of one {full} record to out."""',
                *body,
            ]
        return fn

    def branch_function(self, index: int, schema: dict[str, Any], namespace: str) -> tuple[str, str]:
        """Generate the function writing union branch ``index`` (index, then record); return (name, full name)."""
        schema, space = self.resolve(schema, namespace)
        if not isinstance(schema, dict) or schema["type"] not in ("record", "error"):
            raise ValueError("the log's union holds records only")
        full = self.full_name(schema, namespace)
        fn = f"branch_{index}_" + full.replace(".", "_")
        self.functions[fn] = [
            self.signature(fn),
            f'    """Append union branch {index}, one {full} record, to out."""',
            f"    out += {_varint_literal(index << 1)!r}",
            *self.fields(schema, space, "    "),
        ]
        return fn, full

    def field_functions(self, schema: dict[str, Any], namespace: str) -> list[tuple[str, str, bool]]:
        """Generate one function per field (to name a bad value); return (field, function, whether it may be absent)."""
        full = self.full_name(schema, namespace)
        out = []
        for k, field in enumerate(schema["fields"]):
            fn = f"field_{full.replace('.', '_')}_{k}"
            var = self.fresh()
            self.functions[fn] = [
                f"def {fn}({var}, out):",
                *self.value(field["type"], full.rpartition(".")[0], var, "    "),
            ]
            out.append((field["name"], fn, "default" in field or nullable(field["type"])))
        return out


def nullable(schema: Any) -> bool:
    """Return whether a field of this type may be absent from a record (written as null)."""
    return schema == "null" or (isinstance(schema, list) and "null" in schema)


def describe(schema: Any) -> str:
    """Return a short human description of an Avro type, for comments and messages."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return " | ".join(describe(s) for s in schema)
    if schema.get("logicalType"):
        return f"{schema['type']} ({schema['logicalType']})"
    if schema["type"] == "enum":
        return f"enum {schema['name'].rpartition('.')[2]} ({', '.join(schema['symbols'])})"
    if schema["type"] in ("record", "fixed", "error"):
        return f"{schema['type']} {schema['name'].rpartition('.')[2]}"
    if schema["type"] == "array":
        return f"array of {describe(schema['items'])}"
    if schema["type"] == "map":
        return f"map of {describe(schema['values'])}"
    return str(schema["type"])




# --- the module the build compiles -----------------------------------------------------------------

_HEADER = '''"""The event log's record encoders, generated from schemas/*.avsc when the package was built; do not edit.

``ledger.log.avro_codegen`` wrote this module (``module_source``) and the build compiles it with
mypyc; ``ledger.log.avro_encode`` uses ``BRANCHES`` only while the schemas it is given generate
code whose sha256 is ``DIGEST``, and its own generated encoders otherwise.
"""

'''

# The names the generated code reads, as the exec path gives them (ledger.log.avro_encode._GLOBALS).
_IMPORTS = """from __future__ import annotations

from collections.abc import Callable
from datetime import datetime as _datetime
from typing import Any, Final

from ledger.log.avro_bytes import BOOL as _BOOL
from ledger.log.avro_bytes import INT_MAX as _IMAX
from ledger.log.avro_bytes import INT_MIN as _IMIN
from ledger.log.avro_bytes import LONG_MAX as _LMAX
from ledger.log.avro_bytes import LONG_MIN as _LMIN
from ledger.log.avro_bytes import MICROS as _MICROS
from ledger.log.avro_bytes import MILLIS as _MILLIS
from ledger.log.avro_bytes import not_a as _not_a
from ledger.log.avro_bytes import out_of_range as _range
from ledger.log.avro_bytes import pack_double as _double
from ledger.log.avro_bytes import pack_float as _float
from ledger.log.avro_bytes import time_bytes as _time_bytes
from ledger.log.avro_bytes import varint as _varint
"""

_CONSTANT_TYPES = {"ENUM": "dict[Any, bytes]", "SYMBOLS": "frozenset[Any]", "DEFAULT": "Any"}


def _literal(value: Any) -> str:
    """Return a Python expression for a constant; the same text in every process (no set order)."""
    if isinstance(value, frozenset):
        return f"frozenset({sorted(value)!r})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(_literal(v) + ", " for v in value) + ")"
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return repr(value)
    raise ValueError(f"a default the generated module cannot spell: {value!r:.80}")


def _body(union: Sequence[Any]) -> str:
    """Return the typed module's tables, functions and ``BRANCHES`` for a union of records."""
    compiler = Compiler(typed=True)
    branches = [compiler.branch_function(index, branch, "") for index, branch in enumerate(union)]
    tables = "".join(
        f"{name}: Final[{_CONSTANT_TYPES[name.split('_')[1]]}] = {_literal(value)}\n"
        for name, value in compiler.constants.items()
    )
    parts = [tables, *("\n".join(lines) + "\n" for lines in compiler.functions.values())]
    table = "".join(f"    {full!r}: {fn},\n" for fn, full in branches)
    parts.append(f"BRANCHES: Final[dict[str, Callable[[dict[str, Any], bytearray], None]]] = {{\n{table}}}\n")
    return "\n\n".join(parts)


def module_digest(union: Sequence[Any]) -> str:
    """Return the sha256 of the typed module's code for this union (what its ``DIGEST`` records)."""
    return hashlib.sha256((_IMPORTS + _body(union)).encode()).hexdigest()


def module_source(union: Sequence[Any]) -> str:
    """Return the whole typed module for a union of records: its code, and ``DIGEST``, the code's sha256."""
    body = _body(union)
    digest = hashlib.sha256((_IMPORTS + body).encode()).hexdigest()
    return f'{_HEADER}{_IMPORTS}\nDIGEST: Final = "{digest}"\n\n\n{body}'
