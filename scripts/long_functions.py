"""List production functions longer than a limit (default 60 lines), longest first.

    python scripts/long_functions.py [--limit N] [--exclude PATH ...] [PACKAGE ...]

Counts a function from its `def` (decorators excluded) to its last line, docstring included.
Exits 1 when any function is over the limit, so CI can run it as a check.
"""

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# comparison/ is left out until its own restructure lands; migrations are generated.
PACKAGES = ("cauterweb", "lifecycle", "replay", "dashboard")
SKIP_PARTS = {"migrations", "fixtures"}


def long_functions(
    packages=PACKAGES, limit: int = 60, exclude: tuple[str, ...] = ()
) -> list[tuple[int, str]]:
    """(lines, "path:line name") for every function over `limit` lines, leaving out the files
    in `exclude` (paths from the repository root)."""
    found = []
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if SKIP_PARTS.intersection(relative.parts) or relative.as_posix() in exclude:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    size = node.end_lineno - node.lineno + 1
                    if size > limit:
                        where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                        found.append((size, where))
    return sorted(found, reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--exclude", action="append", default=[], help="a file to leave out")
    parser.add_argument("packages", nargs="*", default=PACKAGES)
    args = parser.parse_args()
    found = long_functions(args.packages, args.limit, tuple(args.exclude))
    for size, where in found:
        print(f"{size:5d}  {where}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
