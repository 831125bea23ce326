"""Avro encoding of events given as columns: the log's batch path, the per-record encoders' bytes exactly.

The per-record encoders (``ledger.log.avro_encode``) are generated from the schemas: a function per
record and one per field. This module walks the same fields (``UnionEncoder.fields``) and writes a
whole column of one event type at a time, with no Python object per record:

* whole numbers (int, long, ``timestamp-micros``) as zig-zag varints computed with numpy;
* strings as their UTF-8 length and bytes; booleans; doubles; arrays of strings (a pyarrow list
  column); a union of null and any of these (the column's nulls are the nulls);
* a constant (any value that is not a column: the same for every row) and a ``Coded`` column (a
  code per row into a few distinct values, such as enum symbols or budget paths) are written by the
  field's generated encoder, once per distinct value;
* a column of any other type (maps, records, bytes, fixed, other unions, or numbers held as Python
  objects) by the field's generated encoder, value by value.

So the bytes of a value have one definition, the generated encoder, which the vectorised paths are
tested against byte for byte (``tests/log/test_avro_columns.py``). A value the per-record encoder
refuses is refused here too, with its message: ``UnencodableValue`` naming the event, field and value.

Columns are numpy arrays (a masked array for a nullable field), pyarrow arrays (a DuckDB result's
``.arrow()`` columns, say), or ``Coded``. Each call returns one binary column: a record's bytes
(its union branch, then its fields) per row. The rows of one call must total under 2 GiB
(``ledger.log.batch.EventBatch`` cuts what it is given into slices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ledger.log.avro_encode import FieldSpec, UnencodableValue, UnionEncoder, refusal

__all__ = ["Coded", "ColumnEncoder", "ColumnField", "column_value"]

Part: TypeAlias = "bytes | pa.BinaryArray"  # a constant, or a column of bytes; a record is its parts joined
_EMPTY = pa.scalar(b"", pa.binary())
_U64 = np.uint64


class Coded(NamedTuple):
    """A column of few distinct values: each row's index into ``values`` (each value is encoded once)."""

    codes: npt.NDArray[np.integer[Any]]
    values: Sequence[Any]


class ColumnField(NamedTuple):
    """How one field of a record is written from a column."""

    spec: FieldSpec
    kind: str  # int, long, time, boolean, double, string, enum, strings (array of string), or values (one by one)
    nullable: bytes | None  # for a union of null and ``kind``: the null branch's index byte
    branch: bytes  # ... and the other branch's (empty when the field is no union)


def _kind(encoder: UnionEncoder, spec: FieldSpec) -> ColumnField:
    """Return how the column path writes a field, from its type in the schema."""
    schema, space = encoder.resolve(spec.schema, spec.namespace)
    null: bytes | None = None
    branch = b""
    if isinstance(schema, list):
        kinds = [encoder.resolve(b, space)[0] for b in schema]
        types = [k.get("type") if isinstance(k, dict) else None for k in kinds]
        if len(schema) != 2 or "null" not in types:
            return ColumnField(spec, "values", None, b"")
        at = types.index("null")
        null, branch = bytes((at << 1,)), bytes(((1 - at) << 1,))
        schema = kinds[1 - at]
    kind = _simple(schema)
    if kind == "values" or (kind == "enum" and null is not None):
        return ColumnField(spec, "values", None, b"")
    return ColumnField(spec, kind, null, branch)


def _simple(schema: Any) -> str:
    """Return the vectorised kind of a type that is no union (``values`` where there is none)."""
    if not isinstance(schema, dict):
        return "values"
    kind, logical = schema.get("type"), schema.get("logicalType")
    if kind == "long" and logical == "timestamp-micros":
        return "time"
    if logical is not None:
        return "values"
    if kind in ("int", "long", "boolean", "double", "string", "enum"):
        return str(kind)
    items = schema.get("items")
    if kind == "array" and (items == "string" or (isinstance(items, dict) and items.get("type") == "string")):
        return "strings"
    return "values"


class _Refused(Exception):
    """A row of a column that the field's encoder would refuse (or must be asked about)."""

    def __init__(self, row: int) -> None:
        super().__init__(row)
        self.row = row


class ColumnEncoder:
    """Write events of one type, given as columns, as the log's union branch: a binary column of records."""

    def __init__(self, encoder: UnionEncoder) -> None:
        self._encoder = encoder
        self.fields = {full: [_kind(encoder, spec) for spec in specs] for full, specs in encoder.fields.items()}
        """Each record's fields as the column path writes them, by full record name."""

    def encode(self, full: str, columns: Mapping[str, Any], n: int) -> pa.BinaryArray:
        """Return the bytes of ``n`` records of record ``full`` (union branch, then fields), one per row.

        ``columns`` maps field names to columns of ``n`` rows or to constants; a field left out is
        written as its default (or null), as the per-record encoder does. Raises UnencodableValue
        naming the first row's event, field and value that the field's encoder would refuse.
        """
        fields = self.fields.get(full)
        if fields is None:
            raise UnencodableValue("batch", "type", full, "not a record of the log's schema")
        unknown = set(columns) - {f.spec.name for f in fields}
        if unknown:
            short = full.rpartition(".")[2]
            raise UnencodableValue(short, sorted(unknown)[0], None, "no such field in the schema")
        if n == 0:
            return pa.array([], pa.binary())
        parts: list[Part] = [bytes((self._encoder.index[full] << 1,))]
        for field in fields:
            spec = field.spec
            if spec.name in columns:
                column = columns[spec.name]
            elif spec.absent_ok:
                column = spec.default
            else:
                raise UnencodableValue(full.rpartition(".")[2], spec.name, None, "missing, and it has no default")
            try:
                parts += _field(field, column, n)
            except _Refused as refused:
                raise self._refusal(full, field, columns, refused.row) from None
        return join(parts, n)

    def _refusal(self, full: str, field: ColumnField, columns: Mapping[str, Any], row: int) -> UnencodableValue:
        """Return the error for the value of ``field`` at ``row``, as the field's encoder phrases it."""
        short = full.rpartition(".")[2]
        value = column_value(columns.get(field.spec.name, field.spec.default), row)
        ids = columns.get("event_id")
        event_id = None if ids is None else column_value(ids, row)
        found = refusal(short, field.spec, value, event_id)
        return found or UnencodableValue(short, field.spec.name, value, "not encodable as a column value", event_id)


def column_value(column: Any, row: int) -> Any:
    """Return a column's value at ``row`` as a Python value (a constant's value for any row)."""
    if isinstance(column, Coded):
        return column.values[int(column.codes[row])]
    if isinstance(column, np.ma.MaskedArray):
        return None if bool(np.ma.getmaskarray(column)[row]) else column.data[row].item()
    if isinstance(column, np.ndarray):
        value = column[row]
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(column, pa.Array | pa.ChunkedArray):
        return column[row].as_py()
    return column


# --- the fields -------------------------------------------------------------------------------------


def _field(field: ColumnField, column: Any, n: int) -> list[Part]:
    """Return the parts that write one field of ``n`` rows from ``column``."""
    spec = field.spec
    if isinstance(column, Coded):
        return [_coded(spec, column, n)]
    if not isinstance(column, np.ndarray | pa.Array | pa.ChunkedArray):
        return [_one(spec, column, 0)]  # a constant
    if len(column) != n:
        raise ValueError(f"column {spec.name!r} has {len(column)} rows, expected {n}")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if field.kind == "values":
        return [_values(spec, column)]
    valid = _valid(column)
    if field.nullable is None:
        if valid is not None:
            raise _Refused(int(np.flatnonzero(~valid)[0]))  # a null for a field that holds none
        parts = _vector(field.kind, spec, column)
        return [_values(spec, column)] if parts is None else parts
    filled = column if valid is None else _fill(column)
    inner = _vector(field.kind, spec, filled)
    if inner is None:
        return [_values(spec, column)]
    if valid is None:
        return [field.branch, *inner]
    if not valid.any():
        return [field.nullable]
    either = pc.if_else(pa.array(valid), join([field.branch, *inner], n), pa.scalar(field.nullable, pa.binary()))
    return [either]


def _valid(column: np.ndarray | pa.Array) -> npt.NDArray[np.bool_] | None:
    """Return where a column holds a value, or None when it has no nulls."""
    if isinstance(column, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(column)
        return ~mask if mask.any() else None
    if isinstance(column, pa.Array) and column.null_count:
        out: npt.NDArray[np.bool_] = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), np.bool_)
        return out
    return None


def _fill(column: np.ndarray | pa.Array) -> np.ndarray | pa.Array:
    """Return the column with its nulls replaced by a value of its type (written nowhere: the null branch is)."""
    if isinstance(column, np.ndarray):  # a masked array (the only numpy column with nulls)
        blank = False if column.dtype.kind == "b" else 0 if column.dtype.kind in "iuf" else ""
        return np.asarray(np.ma.filled(column, blank))
    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pc.if_else(column.is_valid(), column, pa.scalar([], kind))
    if pa.types.is_boolean(kind):
        return column.fill_null(False)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_timestamp(kind):
        return column.fill_null(pa.scalar(0).cast(kind))
    return column.fill_null(pa.scalar("").cast(kind))


def _vector(kind: str, spec: FieldSpec, column: np.ndarray | pa.Array) -> list[Part] | None:
    """Return the parts writing a column with no nulls, or None when its type has no vectorised path."""
    if kind in ("int", "long", "time"):
        numbers = _integers(column, kind)
        if numbers is None:
            return None
        if kind == "int":
            wrong = (numbers < -(2**31)) | (numbers > 2**31 - 1)
            if wrong.any():
                raise _Refused(int(np.flatnonzero(wrong)[0]))
        if len(numbers) and numbers.min() == numbers.max():  # the same in every row: its bytes once, a constant
            return [varints(zigzag(numbers[:1])).to_pylist()[0]]
        return [varints(zigzag(numbers))]
    if kind == "boolean":
        flags = _numpy(column, "b")
        if flags is None:
            return None
        if len(flags) and (flags.all() or not flags.any()):  # the same in every row: a constant
            return [b"\x01" if flags[0] else b"\x00"]
        return [_fixed(flags.astype(np.uint8), 1)]
    if kind == "double":
        reals = _numpy(column, "fiu")
        if reals is None or (reals.dtype.kind in "iu" and np.abs(reals).max(initial=0) > 2**53):
            return None  # (a big whole number: struct rounds it as Python does; numpy need not)
        return [_fixed(reals.astype("<f8").view(np.uint8), 8)]
    if kind == "string":
        text = _text(column)
        return None if text is None else strings(text)
    if kind == "enum":  # a few symbols: each written once by the field's encoder
        text = _text(column)
        if text is None:
            return None
        coded = pc.dictionary_encode(text)
        codes = np.asarray(coded.indices.to_numpy(zero_copy_only=False), np.int64)
        return [_coded(spec, Coded(codes, coded.dictionary.to_pylist()), len(codes))]
    if kind == "strings":
        if not isinstance(column, pa.ListArray | pa.LargeListArray) or column.null_count:
            return None
        items = _text(column.flatten())
        if items is None or items.null_count:
            return None
        return _string_lists(column, items)
    raise AssertionError(kind)


def _integers(column: np.ndarray | pa.Array, kind: str) -> npt.NDArray[np.int64] | None:
    """Return a column of whole numbers as int64 (timestamps as microseconds), or None if it holds other things."""
    if isinstance(column, pa.Array) and pa.types.is_timestamp(column.type):
        if kind != "time" or column.type.tz is None or column.type.unit == "ns":
            return None  # a naive time, or one finer than the field: the per-value path says so
        column = column.cast(pa.timestamp("us", column.type.tz)).cast(pa.int64())
    numbers = _numpy(column, "iu")
    if numbers is None:
        return None
    if numbers.dtype.kind == "u" and numbers.dtype.itemsize == 8:
        wrong = numbers > np.uint64(2**63 - 1)
        if wrong.any():
            raise _Refused(int(np.flatnonzero(wrong)[0]))
    return numbers.astype(np.int64, copy=False)


def _numpy(column: np.ndarray | pa.Array, kinds: str) -> np.ndarray | None:
    """Return the column as numpy if its values are of the numpy kinds given (``b``, ``i``, ``u``, ``f``), else None."""
    if isinstance(column, pa.Array):
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_boolean(
                column.type)):  # fmt: skip
            return None
        column = column.to_numpy(zero_copy_only=False)
    array = np.asarray(column)
    return array if array.dtype.kind in kinds else None


def _text(column: np.ndarray | pa.Array) -> pa.StringArray | None:
    """Return a column of strings as a pyarrow string column, or None if it holds anything else."""
    if isinstance(column, np.ndarray):
        if column.dtype.kind != "U" and not (column.dtype.kind == "O" and all(isinstance(v, str) for v in column)):
            return None
        try:
            column = pa.array(column, pa.string())
        except UnicodeEncodeError:  # text UTF-8 cannot hold: the per-value path names it
            return None
    if pa.types.is_large_string(column.type):
        column = column.cast(pa.string())
    return column if pa.types.is_string(column.type) else None


# --- the encoded parts ------------------------------------------------------------------------------


def _one(spec: FieldSpec, value: Any, row: int) -> bytes:
    """Return the bytes of one value of a field (its encoder's); _Refused at ``row`` if it refuses it."""
    out = bytearray()
    try:
        spec.encode(value, out)
    except Exception:
        raise _Refused(row) from None
    return bytes(out)


def _coded(spec: FieldSpec, column: Coded, n: int) -> Part:
    """Return the bytes of a coded column: each distinct value encoded once, then taken by code."""
    codes = np.asarray(column.codes)
    if len(codes) != n:
        raise ValueError(f"column {spec.name!r} has {len(codes)} rows, expected {n}")
    if n and (codes.min() < 0 or codes.max() >= len(column.values)):
        raise ValueError(f"column {spec.name!r}: a code outside its {len(column.values)} values")
    encoded: list[bytes] = []
    for k, value in enumerate(column.values):
        try:
            encoded.append(_one(spec, value, 0))
        except _Refused:
            used = np.flatnonzero(codes == k)
            if len(used):
                raise _Refused(int(used[0])) from None
            encoded.append(b"")  # a value no row has is never written
    if len(encoded) == 1:
        return encoded[0]
    table: pa.BinaryArray = pa.array(encoded, pa.binary()).take(pa.array(codes))
    return table


def _values(spec: FieldSpec, column: np.ndarray | pa.Array) -> pa.BinaryArray:
    """Return the bytes of a column written value by value by the field's encoder (its types have no vector path)."""
    if isinstance(column, pa.Array):
        values = column.to_pylist()
    else:
        values = [column_value(column, r) for r in range(len(column))]
    out: list[bytes] = []
    add = out.append
    encode = spec.encode
    for row, value in enumerate(values):
        data = bytearray()
        try:
            encode(value, data)
        except Exception:
            raise _Refused(row) from None
        add(bytes(data))
    return pa.array(out, pa.binary())


def zigzag(numbers: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """Return Avro's zig-zag form of whole numbers (the sign moved to the lowest bit)."""
    out: npt.NDArray[np.uint64] = ((numbers << 1) ^ (numbers >> 63)).view(_U64)
    return out


def varints(values: npt.NDArray[np.uint64], present: npt.NDArray[np.bool_] | None = None) -> pa.BinaryArray:
    """Return the Avro varint bytes of unsigned numbers (7 bits a byte, low bits first); empty where not ``present``."""
    n = len(values)
    values = values.astype(_U64, copy=False)
    if n and int(values.max()) < 0x80:
        lengths = np.ones(n, np.int64) if present is None else present.astype(np.int64)
        data = values.astype(np.uint8) if present is None else values[present].astype(np.uint8)
        return _binary(lengths, data)
    width = max(1, (int(values.max(initial=0)).bit_length() + 6) // 7)
    lengths = np.ones(n, np.int64)
    for k in range(1, width):
        lengths += values >= _U64(1 << (7 * k))
    bytes_ = np.empty((n, width), np.uint8)
    for k in range(width):
        more = (lengths > k + 1).astype(_U64) << _U64(7)  # the high bit: another byte follows
        bytes_[:, k] = ((values >> _U64(7 * k)) & _U64(0x7F)) | more
    if present is not None:
        lengths = np.where(present, lengths, 0)
    if present is None and n and int(lengths.min()) == width:  # all as long (times of one era): no gaps to close
        return _binary(lengths, bytes_.reshape(-1))
    keep = np.arange(width)[None, :] < lengths[:, None]
    return _binary(lengths, bytes_[keep])


def strings(text: pa.StringArray) -> list[Part]:
    """Return the parts writing Avro strings: the UTF-8 length as a varint, then the bytes."""
    lengths = np.asarray(pc.binary_length(text).to_numpy(zero_copy_only=False), np.int64)
    return [varints((lengths << 1).view(_U64)), text.cast(pa.binary())]


def _string_lists(lists: pa.ListArray | pa.LargeListArray, items: pa.StringArray) -> list[Part]:
    """Return the parts writing Avro arrays of strings: a count (none when empty), the items, a closing 0."""
    offsets = np.asarray(lists.offsets.to_numpy(), np.int64)
    counts = np.diff(offsets)
    each = join(strings(items), len(items))
    starts = pa.array((offsets - offsets[0]).astype(np.int32))
    rows = pc.binary_join(pa.ListArray.from_arrays(starts, each), _EMPTY)
    return [varints((counts << 1).view(_U64), counts > 0), rows, b"\x00"]


def _fixed(data: npt.NDArray[np.uint8], width: int) -> pa.BinaryArray:
    """Return a binary column of values ``width`` bytes each, laid out one after the other in ``data``."""
    n = len(data) // width
    return _binary(np.full(n, width, np.int64), np.ascontiguousarray(data))


def _binary(lengths: npt.NDArray[np.int64], data: npt.NDArray[np.uint8]) -> pa.BinaryArray:
    """Return a binary column from each value's length and the values' bytes one after the other."""
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def join(parts: Sequence[Part], n: int) -> pa.BinaryArray:
    """Return each row's parts one after the other (a constant part is the same bytes in every row)."""
    merged: list[Part] = []
    for part in parts:
        if isinstance(part, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += part
        elif not (isinstance(part, bytes) and not part):
            merged.append(part)
    if not merged:
        return _binary(np.zeros(n, np.int64), np.zeros(0, np.uint8))
    if len(merged) == 1:
        only = merged[0]
        if isinstance(only, bytes):
            return _fixed(np.frombuffer(bytes(only * n), np.uint8), len(only)) if n else pa.array([], pa.binary())
        return only
    args: list[Any] = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in merged]
    joined: pa.BinaryArray = pc.binary_join_element_wise(*args, _EMPTY)
    return joined

