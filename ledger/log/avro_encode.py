"""Avro binary encoders compiled from the event schemas: the log's fast path for writing blocks.

fastavro's ``Writer`` interprets the schema for every value it writes (a union is resolved by
trying each branch in turn, a field's writer is looked up by type name), which costs several
microseconds per record. Here each record schema is turned once, at first use, into the source
of a plain Python function that writes its fields in schema order with no interpretation left
(see ``UnionEncoder.source`` for the generated code), and that source is compiled with ``exec``.

The bytes are exactly fastavro's for every value fastavro accepts and the models allow (a
property test compares them). Where fastavro writes a value silently although it does not fit
its type (an ``int`` beyond 32 bits, a string for an array, a naive datetime read in local time)
the compiled code refuses it instead. A value that cannot be encoded never produces bytes: the
whole batch raises :class:`UnencodableValue`, which names the record, the field and the value.

Covered: null, boolean, int, long (zig-zag varints), float, double (little-endian IEEE), bytes,
string (length-prefixed UTF-8), fixed, enum, array, map, records (nested and recursive), unions
(any mix of branches that a value's Python type tells apart, with fastavro's first-match order),
and the logical types ``timestamp-micros`` / ``timestamp-millis`` given as integers or aware
datetimes. Any other logical type, or a union of two records, is refused when compiling, so a
schema change the encoder does not understand fails loudly instead of writing different bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

__all__ = ["UnencodableValue", "UnionEncoder", "string_bytes", "union_encoder", "varint", "zigzag_bytes"]

Record = dict[str, Any]
Encode = Callable[[Any, bytearray], None]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_COMPLEX = {"record", "error", "enum", "fixed", "array", "map"}
_TIMESTAMP_SCALE = {"timestamp-micros": 1, "timestamp-millis": 1000}


class UnencodableValue(ValueError):
    """A record value that its Avro type cannot hold; names the record, field and value."""

    def __init__(self, record_name: str, field: str, value: Any, reason: str, event_id: Any = None) -> None:
        super().__init__(f"{record_name}.{field}: {reason}; value {value!r:.200}")
        self.record_name = record_name
        self.field = field
        self.value = value
        self.reason = reason
        self.event_id = event_id


# --- zig-zag varints -------------------------------------------------------------------------------
# Avro longs are zig-zag encoded, then written 7 bits a byte, low bits first. A Python loop over
# single bytes costs about 0.8 µs for a timestamp (8 bytes); tables of 14-bit pieces halve that,
# and timestamps close together share everything above bit 28, so that tail is cached.

_ONE = tuple(bytes((i,)) for i in range(128))
# Filled at the first varint of two bytes or more, not at import: readers never need them.
_MID: list[bytes] = []  # 14 bits with more to follow
_LAST: list[bytes] = []  # 128 <= i < 2**14: the last two bytes
_HIGH: dict[int, bytes] = {}


def _fill_tables() -> None:
    # Built aside and put in place with one slice assignment each (atomic), _LAST last: threads
    # encoding at once may both build them, but none ever sees a half-filled table.
    mid = [bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(1 << 14)]
    last = [bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(1 << 14)]
    _MID[:] = mid
    _LAST[:] = last


def _spread(n: int) -> bytes:
    """Return the varint bytes of an unsigned n (no cache)."""
    if n < 0x80:
        return _ONE[n]
    if n < 0x4000:
        return _LAST[n]
    out = _MID[n & 0x3FFF]
    n >>= 14
    while n >= 0x4000:
        out += _MID[n & 0x3FFF]
        n >>= 14
    return out + (_ONE[n] if n < 0x80 else _LAST[n])


def varint(n: int) -> bytes:
    """Return the Avro varint bytes of an already zig-zagged, non-negative n."""
    if n < 0x80:
        return _ONE[n]
    if not _LAST:
        _fill_tables()
    if n < 0x10000000:
        return _spread(n)
    high = n >> 28
    tail = _HIGH.get(high)
    if tail is None:
        if len(_HIGH) >= 4096:  # bounded: random large numbers must not grow it without end
            _HIGH.clear()
        tail = _HIGH[high] = _spread(high)
    return _MID[n & 0x3FFF] + _MID[(n >> 14) & 0x3FFF] + tail



def zigzag_bytes(n: int) -> bytes:
    """Return the Avro bytes of an int or long (zig-zag, then varint)."""
    return varint((n << 1) ^ (n >> 63))


def string_bytes(text: str) -> bytes:
    """Return the Avro bytes of a string (its UTF-8 length, then the UTF-8)."""
    data = text.encode()
    return varint(len(data) << 1) + data

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)  # noqa: UP017 - the name fastavro's arithmetic uses


def _timestamp(value: Any, scale: int) -> int:
    """Return a time as integer microseconds (scale 1) or milliseconds (scale 1000) since the epoch."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("a time without a time zone; give an aware datetime or integer microseconds")
        delta: timedelta = value - _EPOCH
        # fastavro's own arithmetic, so the bytes match: whole seconds, then the microseconds.
        if scale == 1:
            return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return (delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000
    if value.__class__ is int:
        return value
    raise TypeError(f"expected integer time or an aware datetime, got {type(value).__name__}")


_TIME_CACHES: dict[int, dict[Any, bytes]] = {1: {}, 1000: {}}


def _time_bytes(value: Any, scale: int) -> bytes:
    """Return the varint bytes of a timestamp (integer, or aware datetime), remembering them for next time."""
    n = _timestamp(value, scale)
    if not LONG_MIN <= n <= LONG_MAX:
        raise _out_of_range("long")
    data = varint((n << 1) ^ (n >> 63))
    cache = _TIME_CACHES[scale]
    if len(cache) >= 8192:  # bounded; a batch's times mostly cluster, so recent ones are what repeats
        cache.clear()
    cache[value] = data
    return data


def _out_of_range(kind: str) -> OverflowError:
    bits = 32 if kind == "int" else 64
    return OverflowError(f"does not fit an Avro {kind} ({bits}-bit signed)")


def _not_a(kind: str, value: Any) -> TypeError:
    return TypeError(f"expected {kind}, got {type(value).__name__}")


_GLOBALS: dict[str, Any] = {
    "_ONE": _ONE,
    "_varint": varint,
    "_time_bytes": _time_bytes,
    "_MICROS": _TIME_CACHES[1],
    "_MILLIS": _TIME_CACHES[1000],
    "_range": _out_of_range,
    "_not_a": _not_a,
    "_BOOL": {True: b"\x01", False: b"\x00"},
    "_double": struct.Struct("<d").pack,
    "_float": struct.Struct("<f").pack,
    "_LMIN": LONG_MIN,
    "_LMAX": LONG_MAX,
    "_IMIN": INT_MIN,
    "_IMAX": INT_MAX,
}


# --- code generation -------------------------------------------------------------------------------


class _Compiler:
    """Turn schemas into Python source: one function per named record, one per union branch."""

    def __init__(self) -> None:
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
        if logical is not None and not (logical in _TIMESTAMP_SCALE and kind == "long"):
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
                f"{i}out += {var}_b if {var}_b is not None else _time_bytes({var}, {_TIMESTAMP_SCALE[logical]})",
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
            if kind == "string":
                head = [f"{i}{var} = {var}.encode()"]  # UnicodeEncodeError for a lone surrogate
            else:
                head = [f"{i}if not isinstance({var}, bytes | bytearray): raise _not_a('bytes', {var})"]
            n = self.fresh()
            return [
                *head,
                f"{i}{n} = len({var})",
                f"{i}if {n} < 64: out.append({n} << 1)",
                f"{i}else: out += _varint({n} << 1)",
                f"{i}out += {var}",
            ]
        if kind == "fixed":
            size = int(schema["size"])
            return [
                f"{i}if not isinstance({var}, bytes | bytearray) or len({var}) != {size}: "
                f"raise _not_a('{size} bytes', {var})",
                f"{i}out += {var}",
            ]
        if kind == "enum":
            table = self.constant({s: varint(k << 1) for k, s in enumerate(schema["symbols"])}, "ENUM")
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
            lines.append(f"{indent}    out += {varint(index << 1)!r}")
            if schema["type"] != "null":
                lines += self.value(schema, space, var, indent + "    ")
        names = [t[2].get("name", t[2]["type"]) for t in tests]
        lines.append(f"{indent}else: raise _not_a({' or '.join(map(str, names))!r}, {var})")
        return lines

    def test(self, schema: dict[str, Any], var: str) -> str:
        """Return a Python expression telling whether ``var`` belongs to this union branch (fastavro's rule)."""
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical in _TIMESTAMP_SCALE:
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
            lines.append(f"{indent}# {name}: {_describe(field['type'])}")
            if "default" in field:
                # fastavro writes a field's default when the record lacks it.
                default = self.constant(field["default"], "DEFAULT")
                lines.append(f"{indent}{var} = r.get({name!r}, {default})")
            elif _nullable(field["type"]):
                lines.append(f"{indent}{var} = r.get({name!r})")  # fastavro: a missing nullable field is null
            else:
                lines.append(f"{indent}{var} = r[{name!r}]")
            lines += self.value(field["type"], namespace, var, indent)
        return lines

    def record_function(self, schema: dict[str, Any], namespace: str) -> str:
        """Return the name of the function that writes this record, generating it the first time."""
        full = self.full_name(schema, namespace)
        fn = "record_" + full.replace(".", "_")
        if fn not in self.functions:
            self.functions[fn] = []  # reserved first: a recursive record refers to itself
            body = self.fields(schema, full.rpartition(".")[0], "    ")
            self.functions[fn] = [
                f"def {fn}(r, out):",
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
            f"def {fn}(r, out):",
            f'    """Append union branch {index}, one {full} record, to out."""',
            f"    out += {varint(index << 1)!r}",
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
            out.append((field["name"], fn, "default" in field or _nullable(field["type"])))
        return out


def _nullable(schema: Any) -> bool:
    return schema == "null" or (isinstance(schema, list) and "null" in schema)


def _describe(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return " | ".join(_describe(s) for s in schema)
    if schema.get("logicalType"):
        return f"{schema['type']} ({schema['logicalType']})"
    if schema["type"] == "enum":
        return f"enum {schema['name'].rpartition('.')[2]} ({', '.join(schema['symbols'])})"
    if schema["type"] in ("record", "fixed", "error"):
        return f"{schema['type']} {schema['name'].rpartition('.')[2]}"
    if schema["type"] == "array":
        return f"array of {_describe(schema['items'])}"
    if schema["type"] == "map":
        return f"map of {_describe(schema['values'])}"
    return str(schema["type"])


class UnionEncoder:
    """Encoders for a union of records, the log's container schema: one compiled function per branch.

    ``encode_into(records, out)`` appends each (full record name, record) pair as union index +
    record, as fastavro's Writer does with tuple notation; ``source`` is the generated code.
    """

    def __init__(self, union: Sequence[Any]) -> None:
        compiler = _Compiler()
        branches: dict[str, str] = {}
        specs: dict[str, list[tuple[str, str, bool]]] = {}
        for index, branch in enumerate(union):
            fn, full = compiler.branch_function(index, branch, "")
            branches[full] = fn
            specs[full] = compiler.field_functions(compiler.named[full], "")
        self.source = "\n\n".join("\n".join(lines) for lines in compiler.functions.values()) + "\n"
        namespace: dict[str, Any] = {**_GLOBALS, **compiler.constants, "_datetime": datetime}
        exec(compile(self.source, "<gpuledger compiled Avro encoders>", "exec"), namespace)
        self.branches: dict[str, Encode] = {full: namespace[fn] for full, fn in branches.items()}
        self._fields: dict[str, list[_FieldSpec]] = {}
        for full, fields in specs.items():
            schema = {f["name"]: f for f in compiler.named[full]["fields"]}
            self._fields[full] = [
                _FieldSpec(name, namespace[fn], absent_ok, schema[name].get("default"), _describe(schema[name]["type"]))
                for name, fn, absent_ok in fields
            ]

    def encode_into(self, records: Sequence[tuple[str, Record]], out: bytearray) -> None:
        """Append every (full record name, record) pair to out; raise UnencodableValue naming a bad value."""
        branches = self.branches
        try:
            for name, record in records:
                branches[name](record, out)
        except Exception as exc:  # any failure: find the record and field, and say why
            raise self.explain(records, exc) from None

    def encode(self, name: str, record: Record) -> bytes:
        """Return one record's bytes as a branch of the union (its index, then its fields)."""
        out = bytearray()
        self.encode_into([(name, record)], out)
        return bytes(out)

    def explain(self, records: Sequence[tuple[str, Record]], exc: Exception) -> UnencodableValue:
        """Return the error naming the first record, field and value that do not encode."""
        for name, record in records:
            fields = self._fields.get(name)
            if fields is None:
                return UnencodableValue("batch", "type", name, "not a record of the log's schema")
            short = name.rpartition(".")[2]
            if not isinstance(record, dict):
                return UnencodableValue(short, "record", record, "a record must be a dict")
            event_id = record.get("event_id")
            for spec in fields:
                value = record.get(spec.name, _MISSING)
                if value is _MISSING:
                    if not spec.absent_ok:
                        return UnencodableValue(short, spec.name, None, "missing, and it has no default", event_id)
                    value = spec.default
                try:
                    spec.encode(value, bytearray())
                except UnicodeEncodeError:
                    return UnencodableValue(short, spec.name, value, "text that UTF-8 cannot encode", event_id)
                except OverflowError as problem:  # a whole number out of the type's range
                    return UnencodableValue(short, spec.name, value, str(problem), event_id)
                except Exception as problem:
                    # A KeyError comes from a table lookup (enum symbols, booleans): the type says it all.
                    reason = "" if isinstance(problem, KeyError) else f" ({problem})"
                    return UnencodableValue(short, spec.name, value, f"not an Avro {spec.avro_type}{reason}", event_id)
        return UnencodableValue("batch", "record", None, f"does not encode as Avro ({type(exc).__name__}: {exc})")


class _FieldSpec(NamedTuple):
    name: str
    encode: Encode
    absent_ok: bool
    default: Any
    avro_type: str


_MISSING = object()
_ENCODERS: dict[str, UnionEncoder] = {}


def union_encoder(union: Sequence[Any]) -> UnionEncoder:
    """Return the compiled encoder of a union-of-records schema (compiled once per distinct schema)."""
    import fastavro

    key = str(fastavro.schema.to_parsing_canonical_form(list(union)))
    encoder = _ENCODERS.get(key)
    if encoder is None:
        encoder = _ENCODERS[key] = UnionEncoder(union)
    return encoder
