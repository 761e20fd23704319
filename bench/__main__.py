"""`make bench`: run every benchmark in turn at its default size."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    names = sorted(
        m.name
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if not m.name.startswith("_")
    )
    only = set(sys.argv[1:])
    for name in names:
        if only and name not in only:
            continue
        module = importlib.import_module(f"bench.{name}")
        if hasattr(module, "main") and getattr(module, "STANDALONE", True):
            print(f"\n=== bench.{name} ===", flush=True)
            module.main([])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
