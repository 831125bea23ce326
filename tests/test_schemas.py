"""The pydantic models and schemas/*.avsc must describe the same events, field for field."""

from __future__ import annotations

import typing
from datetime import datetime
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

import pytest

from ledger.codec import history_schemas, raw_schemas
from ledger.events import EVENT_TYPES

_PRIMITIVE = {str: "string", int: ("int", "long"), float: "double", bool: "boolean"}


def _avro_kind(avro_type: Any) -> tuple[bool, Any]:
    """Return (nullable, base type) of an Avro field type."""
    if isinstance(avro_type, list):
        rest = [t for t in avro_type if t != "null"]
        assert len(rest) == 1, avro_type
        return True, rest[0]
    return False, avro_type


def _strip(tp: Any) -> Any:
    while get_origin(tp) is typing.Annotated:
        tp = get_args(tp)[0]
    return tp


def _python_kind(tp: Any) -> tuple[bool, Any]:
    tp = _strip(tp)
    if get_origin(tp) in (UnionType, typing.Union):
        args = [a for a in get_args(tp) if a is not NoneType]
        return True, _strip(args[0])
    return False, tp


def _matches(py: Any, avro: Any) -> bool:
    if isinstance(avro, dict):
        kind = avro["type"]
        if kind == "long" and avro.get("logicalType") == "timestamp-micros":
            return py is datetime
        if kind == "enum":
            return get_origin(py) is typing.Literal and list(get_args(py)) == avro["symbols"]
        if kind == "array":
            return get_origin(py) is tuple and _matches(_strip(get_args(py)[0]), avro["items"])
        return _matches(py, kind)
    want = _PRIMITIVE.get(py)
    return avro in want if isinstance(want, tuple) else avro == want


@pytest.mark.parametrize("name", sorted(EVENT_TYPES))
def test_model_and_schema_agree(name: str) -> None:
    schema = raw_schemas()[name]
    model = EVENT_TYPES[name]
    avro_fields = {f["name"]: f for f in schema["fields"]}
    assert list(avro_fields) == list(model.model_fields), "same fields in the same order"
    for field_name, info in model.model_fields.items():
        avro = avro_fields[field_name]
        py_nullable, py_type = _python_kind(info.annotation)
        avro_nullable, avro_type = _avro_kind(avro["type"])
        assert py_nullable == avro_nullable, f"{name}.{field_name}: nullability differs"
        assert _matches(py_type, avro_type), f"{name}.{field_name}: {py_type} vs {avro_type}"
        assert info.is_required() == ("default" not in avro), f"{name}.{field_name}: required in one only"
        if "default" in avro and not isinstance(info.default, tuple):
            assert info.default == avro["default"], f"{name}.{field_name}: defaults differ"


def test_every_schema_has_a_model() -> None:
    assert set(raw_schemas()) == set(EVENT_TYPES)


def test_every_model_writes_its_schema_version() -> None:
    for name, model in EVENT_TYPES.items():
        assert model.model_fields["schema_version"].default == model.SCHEMA_VERSION, name


def test_history_schemas_are_older_versions_of_current_events() -> None:
    assert history_schemas(), "at least one older writer schema is kept to test resolution"
    for old in history_schemas():
        assert old["name"] in raw_schemas()
        current = {f["name"] for f in raw_schemas()[old["name"]]["fields"]}
        added = current - {f["name"] for f in old["fields"]}
        for f in raw_schemas()[old["name"]]["fields"]:
            if f["name"] in added:
                assert "default" in f, (
                    f"{old['name']}.{f['name']} was added without a default: old events would not read"
                )



def _limits(tp: Any) -> tuple[int | None, int | None]:
    """Return the (ge, le) constraints found anywhere in an annotation (through Annotated and Optional)."""
    low = high = None
    if get_origin(tp) is typing.Annotated:
        base, *meta = get_args(tp)
        low, high = _limits(base)
        for m in meta:
            for c in getattr(m, "metadata", [m]):
                low = getattr(c, "ge", low)
                high = getattr(c, "le", high)
    elif get_origin(tp) in (UnionType, typing.Union):
        for arg in get_args(tp):
            a_low, a_high = _limits(arg)
            low, high = a_low if a_low is not None else low, a_high if a_high is not None else high
    return low, high


@pytest.mark.parametrize("name", sorted(EVENT_TYPES))
def test_integer_fields_are_bounded_to_their_avro_type(name: str) -> None:
    limits = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
    for field in raw_schemas()[name]["fields"]:
        _, avro = _avro_kind(field["type"])
        if not isinstance(avro, str) or avro not in limits:
            continue
        info = EVENT_TYPES[name].model_fields[field["name"]]
        low, high = _limits(typing.Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation)
        assert low is not None and high is not None, f"{name}.{field['name']} is not bounded"
        assert limits[avro][0] <= low and high <= limits[avro][1], f"{name}.{field['name']} exceeds an Avro {avro}"


def test_trusted_builds_exactly_what_model_construct_builds() -> None:
    from ledger.events import trusted
    from tests.streams.scenarios import lab_month

    firsts = {type(e): e for e in reversed(lab_month().events)}
    assert len(firsts) >= 7
    for cls, e in firsts.items():
        whole = dict(e.__dict__)
        without_defaults = {k: v for k, v in whole.items() if cls.model_fields[k].is_required()}
        for values in (whole, without_defaults):
            ours, theirs = trusted(cls, dict(values)), cls.model_construct(**values)
            assert ours.__dict__ == theirs.__dict__, cls.__name__
            assert ours.model_fields_set == theirs.model_fields_set, cls.__name__
            assert (ours.__pydantic_extra__, ours.__pydantic_private__) == (
                theirs.__pydantic_extra__, theirs.__pydantic_private__)
