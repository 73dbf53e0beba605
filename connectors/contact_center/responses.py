"""What a 2xx becomes: the parsers `_send` applies to a response, and the result types.

A read's body that is not the expected shape is an `InvalidBodyError` (retriable); a write's
2xx is never an error (`WriteResult` keeps what came back).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
import orjson
from pydantic import BaseModel, ValidationError

from connectors.contact_center.errors import InvalidBodyError, ResponseShapeError
from connectors.contact_center.paginators import PageInfo, null_list_is_empty
from models.resources import UNREADABLE, ApiModel, WriteModel

logger = logging.getLogger("connectors.contact_center")

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


@dataclass(frozen=True)
class WriteResult(Generic[T]):
    """What a write answered. Any 2xx is success: the server has acted, so nothing here is an
    error and nothing invites a retry.

    `resource` is the expected object (e.g. the `campaign` of `{"campaign": {...}}`) when the
    body has that shape; otherwise None, and `body` holds what came back as it was: the parsed
    JSON, the text when it is not JSON, or None when the body is empty. Most write responses
    are "not shown" by the spec, so a server whose shape differs from the sandbox's loses
    nothing."""

    status: int
    body: Any
    resource: T | None

    @property
    def id(self) -> Any:
        """The `id` of the resource (or of the body's single object), when there is one."""
        found = getattr(self.resource, "id", None)
        if found is None and isinstance(self.body, dict) and len(self.body) == 1:
            inner = next(iter(self.body.values()))
            found = inner.get("id") if isinstance(inner, dict) else None
        return found


@dataclass(frozen=True)
class ListPage(Generic[M]):
    """One page of a list endpoint, parsed."""

    items: list[M]
    total: int | None


def json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        obj = orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise InvalidBodyError(f"response body is not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise InvalidBodyError("response body is not a JSON object")
    return obj


def keyed(key: str) -> Callable[[httpx.Response], Any]:
    def parse(response: httpx.Response) -> Any:
        obj = json_object(response)
        if key not in obj:
            raise InvalidBodyError(f"response has no {key!r} object; retry later")
        return obj[key]

    return parse


def list_body(list_key: str) -> Callable[[httpx.Response], tuple[list[Any], PageInfo]]:
    def parse(response: httpx.Response) -> tuple[list[Any], PageInfo]:
        obj = json_object(response)
        items = obj.get(list_key)
        meta = obj.get("metadata")
        total = meta.get("total") if isinstance(meta, dict) else None
        if total is not None and (not isinstance(total, int) or isinstance(total, bool)):
            raise InvalidBodyError(f"metadata.total is not an integer: {total!r}")
        if not isinstance(items, list):
            if not null_list_is_empty(list_key in obj and items is None, total):
                raise InvalidBodyError(f"200 list body has no {list_key!r} array; retry later")
            items = []
        return items, PageInfo(count=len(items), total=total)

    return parse


def write_result(
    key: str, model: type[M], *, many: bool = False
) -> Callable[[httpx.Response], WriteResult[Any]]:
    """Parse a write's 2xx without ever failing: the typed `{key: ...}` object when the body
    has it, and in every case the body as received."""

    def parse(response: httpx.Response) -> WriteResult[Any]:
        raw: Any = None
        if response.content.strip():
            try:
                raw = orjson.loads(response.content)
            except orjson.JSONDecodeError:
                raw = response.text
        resource: Any = None
        if isinstance(raw, dict) and key in raw:
            try:
                if many and isinstance(raw[key], list):
                    resource = [model.model_validate(item) for item in raw[key]]
                elif not many:
                    resource = model.model_validate(raw[key])
            except ValidationError:
                resource = None
        if resource is None:
            logger.warning(
                "%s %s -> %s: body is not the expected {%s: ...}; returned as received",
                response.request.method,
                response.request.url.path,
                response.status_code,
                key,
            )
        return WriteResult(response.status_code, raw, resource)

    return parse


def note_unreadable(records: Sequence[BaseModel], what: str) -> None:
    """One warning for the records of a response that had fields they could not read (kept as
    received under `_unreadable`: `models.resources.ApiModel`); names the fields, never a
    value."""
    paths = [r.unreadable_fields() if isinstance(r, ApiModel) else [] for r in records]
    odd = [p for p in paths if p]
    if odd:
        fields = sorted({re.sub(r"\[\d+\]", "[]", f) for p in odd for f in p})
        logger.warning(
            "%s: %d of %d records had fields of another type than the spec's (%s); read "
            "without them, their values kept as received under %s",
            what,
            len(odd),
            len(records),
            ", ".join(fields[:10]),
            UNREADABLE,
        )


def to_models(model: type[M], raws: Sequence[Any], method: str, path: str) -> list[M]:
    """Each of `raws` as `model` (`to_model`), and one warning for those read without a field
    (`note_unreadable`)."""
    parsed = [to_model(model, raw, method, path) for raw in raws]
    note_unreadable(parsed, f"{method} {path}")
    return parsed


def to_model(model: type[M], raw: Any, method: str, path: str) -> M:
    """`raw` as `model`; a `ResponseShapeError` naming the request (the step's failure says
    which endpoint) when it does not fit."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        # Field paths and messages only: pydantic's input values could be long or sensitive.
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise ResponseShapeError(
            f"response does not match {model.__name__} ({where})",
            method=method,
            path=path,
        ) from None


def request_body(
    payload: WriteModel | Mapping[str, Any], model: type[WriteModel]
) -> dict[str, Any]:
    """Validate a write body client-side (a mapping goes through the strict model first)."""
    checked = payload if isinstance(payload, WriteModel) else model.model_validate(payload)
    if not isinstance(checked, model):
        raise TypeError(f"expected {model.__name__}, got {type(checked).__name__}")
    return checked.to_body()
