"""The write route table and the plumbing every write handler shares.

Each write module registers its handlers on its own `WriteRoutes`; `routes_writes.routes()`
joins them. A write checks its scope first, then refuses any query parameter (no write takes
one), then reads a JSON object body (400 when malformed, 422 when not an object). Run-time ids
are uuid5 of the seed and a per-kind sequence, so a replayed test sees the same ids.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connectors.sandbox.http import (
    check_query,
    fail,
    get_sandbox,
    require_scope,
)
from connectors.sandbox.state import SandboxState

V4: Final = "/api/v4"
CONFLICT: Final = {"state": ["conflict"]}
_ID_NAMESPACE: Final = uuid.UUID("6f1d3c2e-8a7b-4c1d-9e2f-3a4b5c6d7e8f")

Handler = Callable[[Request], Awaitable[Response]]
# A route: method, path, handler, scope, tag, summary. The scope and summary are also what an
# OpenAPI document shows for the operation.
WriteRoute = tuple[str, str, Handler, str, str, str]


class WriteRoutes:
    """One module's write routes, in registration order."""

    def __init__(self) -> None:
        self.table: list[WriteRoute] = []

    def route(
        self, method: str, path: str, scope: str, tag: str, summary: str
    ) -> Callable[[Handler], Handler]:
        """Register a handler (stackable: one handler may serve several spellings of a path)."""

        def register(handler: Handler) -> Handler:
            self.table.append((method, path, handler, scope, tag, summary))
            return handler

        return register


def starlette_routes(table: Iterable[WriteRoute]) -> list[Route]:
    return [
        Route(path, _guarded(handler, scope), methods=[method], name=summary)
        for method, path, handler, scope, _tag, summary in table
    ]


def _guarded(handler: Handler, scope: str) -> Handler:
    """Auth first, then refuse any query parameter: no write endpoint takes one."""

    async def guarded(request: Request) -> Response:
        require_scope(request, scope)
        check_query(request, frozenset())
        return await handler(request)

    return guarded


def reject(errors: Mapping[str, list[str]]) -> None:
    """422 with the field errors, when there are any."""
    if errors:
        raise fail(dict(errors))


@contextmanager
def locked_state(request: Request) -> Iterator[SandboxState]:
    """The sandbox's mutable state with its lock held: one write at a time."""
    state: SandboxState = get_sandbox(request).state
    with state.lock:
        yield state


def dataset(request: Request) -> Any:
    return get_sandbox(request).dataset


def new_id(request: Request, kind: str, sequence: int) -> str:
    seed = get_sandbox(request).config.seed
    return str(uuid.uuid5(_ID_NAMESPACE, f"{seed}:{kind}:{sequence}"))


def by_id(items: Any) -> dict[Any, Mapping[str, Any]]:
    return {item["id"]: item for item in items}


def active_users(request: Request) -> Mapping[str, Mapping[str, Any]]:
    """The dataset's own index of active users by id (built once with the dimensions)."""
    users: Mapping[str, Mapping[str, Any]] = get_sandbox(request).dataset.users_by_id
    return users
