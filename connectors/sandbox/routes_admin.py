"""Admin routes (not in the spec, no auth, prefix `/_sandbox`): faults, clock, counters and
the ground truth of CDRs, for tests that drive a sandbox in another process."""

from __future__ import annotations

from datetime import timedelta

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connectors.sandbox.faults import FaultConfig
from connectors.sandbox.http import fail, get_sandbox, json_object, json_response
from models.timestamps import iso_ms, parse_ts


async def admin_faults(request: Request) -> Response:
    sandbox = get_sandbox(request)
    if request.method == "PUT":
        body = await json_object(request)
        try:
            sandbox.faults = FaultConfig.model_validate(body)
        except ValidationError as exc:
            raise fail(_field_messages(exc)) from None
    return json_response(sandbox.faults.to_json())


def _field_messages(exc: ValidationError) -> dict[str, list[str]]:
    """Pydantic's errors as the API's 422 body: field path -> messages."""
    out: dict[str, list[str]] = {}
    for error in exc.errors():
        path = ".".join(str(part) for part in error["loc"]) or "body"
        out.setdefault(path, []).append(error["msg"])
    return out


async def admin_clock(request: Request) -> Response:
    clock = get_sandbox(request).clock
    if request.method == "PUT":
        body = await json_object(request)
        field = "now"
        try:
            if "now" in body:
                now = body["now"]
                clock.set(None if now is None else parse_ts(str(now)))
            field = "advance_s"
            if "advance_s" in body:
                clock.advance(timedelta(seconds=float(body["advance_s"])))
        except (TypeError, ValueError, OverflowError) as exc:  # not a number, inf, past 9999
            raise fail({field: [str(exc)]}) from None
    return json_response({"now": iso_ms(clock.now()), "frozen": clock.frozen})


async def admin_counters(request: Request) -> Response:
    return json_response(get_sandbox(request).counters)


async def admin_truth(request: Request) -> Response:
    try:
        start = parse_ts(request.query_params["start"])
        end = parse_ts(request.query_params["end"])
    except (KeyError, ValueError, OverflowError):  # OverflowError: past year 9999 in UTC
        raise fail({"start": ["start and end must be ISO 8601 times"]}) from None
    return json_response({"cdrs": get_sandbox(request).truth_cdrs(start, end)})


ADMIN_ROUTES: list[Route] = [
    Route("/_sandbox/faults", admin_faults, methods=["GET", "PUT"]),
    Route("/_sandbox/clock", admin_clock, methods=["GET", "PUT"]),
    Route("/_sandbox/counters", admin_counters, methods=["GET"]),
    Route("/_sandbox/truth/cdrs", admin_truth, methods=["GET"]),
]
