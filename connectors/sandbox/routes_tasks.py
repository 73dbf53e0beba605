"""GET routes of tasks: webhook failures and scheduled callbacks (each under both paths)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox.http import ApiError, get_sandbox, json_response, paginate
from connectors.sandbox.reads import Json, ReadRoutes

READS = ReadRoutes()


# ------------------------------------------------------------------ tasks


def _state_items(request: Request, attr: str) -> list[Json]:
    state = get_sandbox(request).state
    with state.lock:
        return list(getattr(state, attr).values())


for _path in ("/api/v4/tasks/webhook_failures", "/api/v4/tasks/webhooks/failures"):

    @READS.get(_path, "tasks.webhooks.read", "Tasks", "List webhook failures")
    async def webhook_failures(request: Request) -> Response:
        return paginate(request, "webhook_failures", _state_items(request, "webhook_failures"))


for _path in ("/api/v4/tasks/schedule_callbacks", "/api/v4/tasks/scheduled_callbacks"):

    @READS.get(_path, "tasks.scheduled_callbacks.read", "Tasks", "List scheduled callbacks")
    async def callbacks_list(request: Request) -> Response:
        return paginate(request, "scheduled_callbacks", _state_items(request, "callbacks"))

    @READS.get(
        _path + "/{callback_id}",
        "tasks.scheduled_callbacks.read",
        "Tasks",
        "Get a scheduled callback",
    )
    async def callbacks_one(request: Request) -> Response:
        state = get_sandbox(request).state
        with state.lock:
            item = state.callbacks.get(str(request.path_params["callback_id"]))
        if item is None:
            raise ApiError(404)
        return json_response({"scheduled_callback": item})
