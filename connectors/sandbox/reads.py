"""The GET route table: each route module registers its reads on its own `ReadRoutes`, and
`app.READ_ROUTES` joins them (in order: Starlette matches the first route that fits).

A read checks its scope first, then the query parameters it takes (any other is a 422).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox.http import (
    ApiError,
    check_query,
    get_sandbox,
    json_response,
    paginate,
    require_scope,
)
from connectors.sandbox.params import parse_int, parse_uuid

Handler = Callable[[Request], Awaitable[Response]]
Json = dict[str, Any]
# A route: method, path, scope, tag, summary and handler, in that order.
ReadRoute = tuple[str, str, str, str, str, Handler]

PAGING: frozenset[str] = frozenset({"limit", "offset"})
NO_QUERY: frozenset[str] = frozenset()


class ReadRoutes:
    """One module's GET routes, in registration order."""

    def __init__(self) -> None:
        self.table: list[ReadRoute] = []

    def get(
        self, path: str, scope: str, tag: str, summary: str, query: frozenset[str] | None = None
    ) -> Callable[[Handler], Handler]:
        """Register a GET route: scope first, then the query parameters it takes (others: 422).
        By default a list path takes limit and offset, a detail path (ending in an id) nothing."""
        allowed = query if query is not None else (NO_QUERY if path.endswith("}") else PAGING)

        def register(fn: Handler) -> Handler:
            async def guarded(request: Request) -> Response:
                require_scope(request, scope)
                check_query(request, allowed)
                return await fn(request)

            self.table.append(("GET", path, scope, tag, summary, guarded))
            return fn

        return register

    def list_and_get(
        self, path: str, scope: str, tag: str, summaries: tuple[str, str], *, id_name: str
    ) -> None:
        """GET ``path``: a page of the dataset list named by the path's tail (``.../teams``);
        GET ``path/{id_name}``: one of them by integer id, under the singular key (``team``)."""
        key = path.rsplit("/", 1)[1]
        singular = key.removesuffix("s")

        async def list_items(request: Request) -> Response:
            return paginate(request, key, getattr(get_sandbox(request).dataset, key))

        async def one_item(request: Request) -> Response:
            item_id = int_id(request, id_name)
            items = getattr(get_sandbox(request).dataset, key)
            return one(singular, items, lambda item: item["id"] == item_id)

        self.get(path, scope, tag, summaries[0])(list_items)
        self.get(f"{path}/{{{id_name}}}", scope, tag, summaries[1])(one_item)


def int_id(request: Request, name: str) -> int:
    """An integer path id (ASCII digits, `parse_int`); anything else names no resource: 404."""
    value = parse_int(str(request.path_params[name]))
    if value is None:
        raise ApiError(404)
    return value


def uuid_id(request: Request, name: str) -> str:
    """A UUID path id, lower-cased (`parse_uuid`); anything else names no resource: 404."""
    value = parse_uuid(str(request.path_params[name]))
    if value is None:
        raise ApiError(404)
    return value


def one(key: str, items: list[Json], match: Callable[[Json], bool]) -> Response:
    for item in items:
        if match(item):
            return json_response({key: item})
    raise ApiError(404)
