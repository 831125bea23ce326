"""Run every benchmark (``python -m bench``) or the named ones (``python -m bench log replay``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """Run the named benchmark modules, or all of them, each through its ``main()``."""
    names = argv or sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_")
    )
    for name in names:
        print(f"== bench.{name}", flush=True)
        importlib.import_module(f"bench.{name}").main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
