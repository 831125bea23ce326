"""The record encoders the build generates from the schemas and compiles: the exec encoders' bytes, while current."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.log
from ledger import events as ev
from ledger.buildcheck import GENERATED, generated_source, generated_stale
from ledger.codec import raw_schemas, union_schema
from ledger.log.avro_codegen import module_digest, module_source
from ledger.log.avro_encode import UnionEncoder, union_encoder
from ledger.log.checks import check_batch
from tests.log.strategies import STRATEGIES

ROOT = Path(__file__).resolve().parents[2]
compiled_only = pytest.mark.skipif(not ledger.log.COMPILED, reason="the log's encoders are not compiled (make pure)")


def _typed_branches() -> dict[str, Any]:
    """Return the branches of the generated module's source, run as Python (as a pure build would)."""
    namespace: dict[str, Any] = {}
    exec(compile(module_source(union_schema()), "<avro_records source>", "exec"), namespace)
    branches: dict[str, Any] = namespace["BRANCHES"]
    return branches


TYPED = _typed_branches()
ENCODER = union_encoder(union_schema())


def test_the_generated_module_is_the_same_text_whatever_the_hash_seed() -> None:
    """Its DIGEST must not depend on set or dict order of one process (enum symbols, tables)."""
    code = "from ledger.buildcheck import generated_source; print(generated_source())"
    texts = {
        subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(texts) == 1


def test_the_schemas_on_disk_and_the_parsed_union_generate_the_same_code() -> None:
    raws = raw_schemas()
    assert module_digest([copy.deepcopy(raws[name]) for name in ev.EVENT_TYPES]) == module_digest(union_schema())
    assert f'DIGEST: Final = "{module_digest(union_schema())}"' in generated_source()


def test_a_built_module_matches_the_schemas_of_this_checkout() -> None:
    (path,) = GENERATED
    if not (ROOT / path).exists():
        pytest.skip("not generated here (a pure build)")
    assert generated_stale() == [], "a schema changed since the build: `make` regenerates and compiles it"


@pytest.mark.parametrize("type_name", sorted(ev.EVENT_TYPES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_generated_encoders_write_the_exec_encoders_bytes(type_name: str, data: st.DataObject) -> None:
    ((full, record),) = check_batch([data.draw(STRATEGIES[type_name])])
    expected = bytearray()
    ENCODER.exec_branches[full](record, expected)
    for branches in (TYPED, ENCODER.branches):  # the module's source as Python, and as the log uses it
        out = bytearray()
        branches[full](record, out)
        assert out == expected


@compiled_only
def test_the_log_writes_with_the_compiled_module() -> None:
    assert ENCODER.compiled
    module = sys.modules["ledger.log.avro_records"]
    assert not str(module.__file__).endswith(".py")
    assert ENCODER.branches == module.BRANCHES


def test_a_union_the_module_was_not_generated_from_uses_the_exec_encoders() -> None:
    changed = copy.deepcopy(union_schema())
    changed[0]["fields"].append({"name": "note", "type": ["null", "string"], "default": None})
    encoder = UnionEncoder(changed)
    assert not encoder.compiled
    assert encoder.branches == encoder.exec_branches


def test_an_installed_package_generates_the_module_from_the_schemas_it_installed(tmp_path: Path) -> None:
    # a wheel has no schemas/ beside ledger/: they are installed as ledger/schemas (ledger.codec)
    (tmp_path / "ledger" / "log").mkdir(parents=True)
    (tmp_path / "ledger" / "schemas").mkdir()
    codegen = ROOT / "ledger" / "log" / "avro_codegen.py"
    (tmp_path / "ledger" / "log" / "avro_codegen.py").write_text(codegen.read_text(encoding="utf-8"), encoding="utf-8")
    for schema in (ROOT / "schemas").glob("*.avsc"):
        (tmp_path / "ledger" / "schemas" / schema.name).write_text(schema.read_text(encoding="utf-8"), encoding="utf-8")
    assert generated_source(str(tmp_path)) == generated_source(str(ROOT))
