"""Typed async client of the Contact Center REST API v4 (see docs/architecture.md)."""

from connectors.contact_center.budget import ByteBudget
from connectors.contact_center.cdr import CdrPage, cdr_filter_params, split_window
from connectors.contact_center.client import ContactCenterClient
from connectors.contact_center.endpoints import ENDPOINTS, Endpoint, Safety
from connectors.contact_center.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ContactCenterError,
    FatalAPIError,
    InvalidBodyError,
    ListingChangedError,
    NotAcceptableError,
    NotFoundError,
    PaginationError,
    PermissionDeniedError,
    RateLimitedError,
    ResponseShapeError,
    ResponseTooLargeError,
    RetriableAPIError,
    ServerError,
    TransportFailure,
    ValidationFailedError,
    map_response,
)
from connectors.contact_center.responses import ListPage, WriteResult
from connectors.contact_center.settings import ClientSettings

__all__ = [
    "ENDPOINTS",
    "AuthenticationError",
    "BadRequestError",
    "ByteBudget",
    "CdrPage",
    "ClientSettings",
    "ConflictError",
    "ContactCenterClient",
    "ContactCenterError",
    "Endpoint",
    "FatalAPIError",
    "InvalidBodyError",
    "ListPage",
    "ListingChangedError",
    "NotAcceptableError",
    "NotFoundError",
    "PaginationError",
    "PermissionDeniedError",
    "RateLimitedError",
    "ResponseShapeError",
    "ResponseTooLargeError",
    "RetriableAPIError",
    "Safety",
    "ServerError",
    "TransportFailure",
    "ValidationFailedError",
    "WriteResult",
    "cdr_filter_params",
    "map_response",
    "split_window",
]
