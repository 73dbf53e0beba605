"""The app factory: the route table (reads, writes, admin, OpenAPI), error handlers, and the
ASGI stack (`middleware.py`). Reads come from `routes_directory`, `routes_messaging`,
`routes_tasks` and `routes_cdrs`; writes from `routes_writes.routes()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from connectors.sandbox import (
    routes_cdrs,
    routes_directory,
    routes_messaging,
    routes_tasks,
    routes_writes,
)
from connectors.sandbox.http import ApiError, authenticated, error_response, json_response
from connectors.sandbox.middleware import SandboxApp
from connectors.sandbox.openapi import openapi_route
from connectors.sandbox.reads import ReadRoute
from connectors.sandbox.routes_admin import ADMIN_ROUTES

if TYPE_CHECKING:
    from connectors.sandbox.emulator import Sandbox

# The single GET route table, in matching order; the OpenAPI tests walk it.
READ_ROUTES: list[ReadRoute] = [
    *routes_directory.READS.table,
    *routes_messaging.READS.table,
    *routes_tasks.READS.table,
    *routes_cdrs.READS.table,
]


async def _api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return json_response(exc.body, exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status in (404, 405):
        # Unknown paths (a trailing slash too) and wrong methods are both "path invalid" in the
        # spec: 404 Not found, but like every API request only after authentication.
        if request.url.path.startswith("/api/") and not authenticated(request):
            return error_response(401)
        return error_response(404)
    return error_response(status)


async def _server_error(_request: Request, _exc: Exception) -> Response:
    # Starlette's last handler: the documented JSON 500, not its text/plain page. Starlette
    # re-raises after sending it; middleware.LastResort logs the exception and stops it there.
    return error_response(500)


def create_app(sandbox: Sandbox) -> SandboxApp:
    """The sandbox's ASGI app (routes + admin + OpenAPI, wrapped in the fault layer)."""
    routes: list[BaseRoute] = list(routes_writes.routes())
    routes += [Route(p, h, methods=[m]) for m, p, _s, _t, _summ, h in READ_ROUTES]
    routes += ADMIN_ROUTES
    routes.append(openapi_route())
    app = Starlette(
        routes=routes,
        exception_handlers={
            ApiError: _api_error,
            HTTPException: _http_error,
            Exception: _server_error,
        },
    )
    app.router.redirect_slashes = False  # /api/v4/users/ is an unknown path, not a 307
    app.state.sandbox = sandbox
    return SandboxApp(app, sandbox)
