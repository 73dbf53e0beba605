"""The v4 contract as an OpenAPI 3.1 document (package data), served at
`/api/v4/openapi.json`."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connectors.sandbox.http import raw_json

OPENAPI_FILE = "openapi.json"
OPENAPI_PATH = "/api/v4/openapi.json"


def openapi_bytes() -> bytes:
    """The checked-in OpenAPI 3.1 document (package data), byte for byte: written from the
    spec, not from these routes, so the sandbox is held to it rather than describing itself."""
    return resources.files("connectors.sandbox").joinpath(OPENAPI_FILE).read_bytes()


def openapi_route() -> Route:
    """The route serving the document (read once, when the app is built)."""
    document = openapi_bytes()

    async def openapi(_request: Request) -> Response:
        return raw_json(document)

    return Route(OPENAPI_PATH, openapi, methods=["GET"])
