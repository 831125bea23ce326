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

The exec'd functions run interpreted even in the compiled build. The build therefore also writes the
same code, typed, as ``ledger/log/avro_records.py`` (``ledger.log.avro_codegen``) and compiles it;
``UnionEncoder.branches`` are those compiled functions whenever the union given generates exactly
that module's code, and the exec'd ones otherwise (``exec_branches``; a pure build, a stale build).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from ledger.log.avro_bytes import (
    BOOL,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    MICROS,
    MILLIS,
    ONE,
    not_a,
    out_of_range,
    pack_double,
    pack_float,
    string_bytes,
    time_bytes,
    varint,
    zigzag_bytes,
)
from ledger.log.avro_codegen import Compiler, describe, module_digest

__all__ = [
    "FieldSpec", "UnencodableValue", "UnionEncoder", "refusal", "string_bytes", "union_encoder", "varint",
    "zigzag_bytes",
]  # fmt: skip

Record = dict[str, Any]
Encode = Callable[[Any, bytearray], None]

class UnencodableValue(ValueError):
    """A record value that its Avro type cannot hold; names the record, field and value."""

    def __init__(self, record_name: str, field: str, value: Any, reason: str, event_id: Any = None) -> None:
        super().__init__(f"{record_name}.{field}: {reason}; value {value!r:.200}")
        self.record_name = record_name
        self.field = field
        self.value = value
        self.reason = reason
        self.event_id = event_id


_GLOBALS: dict[str, Any] = {
    "_ONE": ONE,
    "_varint": varint,
    "_time_bytes": time_bytes,
    "_MICROS": MICROS,
    "_MILLIS": MILLIS,
    "_range": out_of_range,
    "_not_a": not_a,
    "_BOOL": BOOL,
    "_double": pack_double,
    "_float": pack_float,
    "_LMIN": LONG_MIN,
    "_LMAX": LONG_MAX,
    "_IMIN": INT_MIN,
    "_IMAX": INT_MAX,
}


class UnionEncoder:
    """Encoders for a union of records, the log's container schema: one compiled function per branch.

    ``encode_into(records, out)`` appends each (full record name, record) pair as union index +
    record, as fastavro's Writer does with tuple notation; ``source`` is the generated code.
    """

    def __init__(self, union: Sequence[Any]) -> None:
        compiler = Compiler()
        branches: dict[str, str] = {}
        specs: dict[str, list[tuple[str, str, bool]]] = {}
        for index, branch in enumerate(union):
            fn, full = compiler.branch_function(index, branch, "")
            branches[full] = fn
            specs[full] = compiler.field_functions(compiler.named[full], "")
        self.source = "\n\n".join("\n".join(lines) for lines in compiler.functions.values()) + "\n"
        namespace: dict[str, Any] = {**_GLOBALS, **compiler.constants, "_datetime": datetime}
        exec(compile(self.source, "<gpuledger compiled Avro encoders>", "exec"), namespace)
        # the exec'd encoders, and the ones the build compiled where they were generated from this union
        self.exec_branches: dict[str, Encode] = {full: namespace[fn] for full, fn in branches.items()}
        built = _built_branches(union)
        self.compiled = built is not None
        self.branches: dict[str, Encode] = self.exec_branches if built is None else built
        self.index = {full: index for index, full in enumerate(branches)}  # each record's branch of the union
        self.resolve = compiler.resolve  # a field type's definition, named types looked up as the code was made
        self.fields: dict[str, list[FieldSpec]] = {}
        for full, fields in specs.items():
            schema = {f["name"]: f for f in compiler.named[full]["fields"]}
            space = full.rpartition(".")[0]
            self.fields[full] = [
                FieldSpec(
                    name, namespace[fn], absent_ok, schema[name].get("default"), describe(schema[name]["type"]),
                    schema[name]["type"], space,
                )
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
            fields = self.fields.get(name)
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
                refused = refusal(short, spec, value, event_id)
                if refused is not None:
                    return refused
        return UnencodableValue("batch", "record", None, f"does not encode as Avro ({type(exc).__name__}: {exc})")


def refusal(short: str, spec: FieldSpec, value: Any, event_id: Any) -> UnencodableValue | None:
    """Return why a field's encoder refuses ``value`` (None if it writes it), as every encoder of the log says it."""
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
    return None


class FieldSpec(NamedTuple):
    """One field of a record as the generated code writes it: its encoder of one value, and its schema."""

    name: str
    encode: Encode  # appends one value's bytes (a union's: its branch index, then the value)
    absent_ok: bool  # a record may leave it out: its default, or null, is written
    default: Any
    avro_type: str  # as messages describe it
    schema: Any  # the field's type as the schema gives it (named types by name: see ``UnionEncoder.resolve``)
    namespace: str


def _built_branches(union: Sequence[Any]) -> dict[str, Encode] | None:
    """Return the compiled encoders of ``ledger.log.avro_records`` if the build generated them from this union.

    The module is written from ``schemas/*.avsc`` by the build (``ledger/buildcheck.py``) and compiled
    with mypyc: the same code as the exec'd encoders, typed. It is used only compiled (its source
    runs no faster than the exec'd code) and only while this union generates exactly its code
    (``DIGEST``): after a schema change, until the next build, the exec'd encoders write the log.
    """
    spec = importlib.util.find_spec("ledger.log.avro_records")
    if spec is None or spec.origin is None or spec.origin.endswith(".py"):
        return None  # not built (a pure build), or its source is being run (GPULEDGER_PURE=1, a stale build)
    module = importlib.import_module("ledger.log.avro_records")
    if getattr(module, "DIGEST", None) != module_digest(union):
        return None
    branches: dict[str, Encode] = module.BRANCHES
    return dict(branches)


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
