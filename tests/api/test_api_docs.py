"""docs/api.md against the API itself: every operation the schema serves is documented, each under
its own method and path, and every `METHOD /api/v1/…` the docs name is served. A route renamed
or added in code, and not in the docs, fails here."""

import re
from pathlib import Path

from cauterweb.api import api

ROOT = Path(__file__).resolve().parents[2]
API_DOC = ROOT / "docs" / "api.md"
OTHER_DOCS = [ROOT / "README.md", *sorted(set((ROOT / "docs").glob("*.md")) - {API_DOC})]
PREFIX = "/api/v1"
ROUTE = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`\s]*)")
OPERATION_ID = re.compile(r"`([a-z]+[A-Z]\w*|replay_api_\w+)`")


def served() -> dict[str, tuple[str, str]]:
    """operationId → (method, path below /api/v1) for every operation of the OpenAPI schema."""
    schema = api.get_openapi_schema(path_prefix=f"{PREFIX}/")
    return {
        operation["operationId"]: (method.upper(), path.removeprefix(PREFIX))
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
    }


def bare(path: str) -> str:
    """A documented path without its query (`?…`, `[?…]`) or the /api/v1 prefix."""
    return re.split(r"[?\[]", path, maxsplit=1)[0].removeprefix(PREFIX).rstrip("/") or "/"


def serves(method: str, path: str, operations: dict[str, tuple[str, str]]) -> bool:
    """A documented route matches a served one; `{id}` or a concrete value fills a parameter."""
    for served_method, served_path in operations.values():
        pattern = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(served_path))
        if served_method == method and re.fullmatch(pattern, bare(path)):
            return True
    return False


def documented_pairs(text: str) -> list[tuple[str, str, str]]:
    """(operationId, method, path) as the docs pair them: in a table row the row's first route
    and operationId, in a paragraph each route with its operationId in order."""
    pairs = []
    blocks = [line for line in text.splitlines() if line.startswith("|")]
    blocks += [block for block in text.split("\n\n") if not block.startswith("|")]
    for block in blocks:
        routes, ids = ROUTE.findall(block), OPERATION_ID.findall(block)
        if block.startswith("|") and routes and ids:
            pairs.append((ids[0], *routes[0]))
        elif len(routes) == len(ids):
            pairs += [(op, *route) for op, route in zip(ids, routes, strict=True)]
    return pairs


def test_every_operation_served_is_documented_under_its_own_method_and_path():
    operations = served()
    pairs = [pair for pair in documented_pairs(API_DOC.read_text()) if pair[0] in operations]
    assert {op for op, _, _ in pairs} == set(operations)
    wrong = [
        f"{op}: docs say {method} {path}, served {operations[op]}"
        for op, method, path in pairs
        if not serves(method, path, {op: operations[op]})
    ]
    assert wrong == []


def test_every_route_the_docs_name_is_served():
    operations = served()
    named = [(API_DOC.name, method, path) for method, path in ROUTE.findall(API_DOC.read_text())]
    for doc in OTHER_DOCS:
        named += [
            (doc.name, method, path)
            for method, path in ROUTE.findall(doc.read_text())
            if path.startswith(f"{PREFIX}/")
        ]
    assert len(named) > 30  # the finder finds them: an empty list would pass below
    assert [route for route in named if not serves(route[1], route[2], operations)] == []


def test_a_route_that_is_not_served_is_found():
    operations = served()
    assert serves("GET", "/rules/{id}/gate", operations)
    assert serves("GET", "/api/v1/scopes/repo:acme%2Fpayments/rules?query=x", operations)
    assert not serves("POST", "/rules/{id}/gate", operations)
    assert not serves("GET", "/rules/{id}/verdict", operations)
