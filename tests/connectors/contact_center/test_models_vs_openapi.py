"""The client's pydantic read models against the OpenAPI document's schemas: every field of one
is in the other, with compatible JSON types (recursively through nested objects)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from connectors.sandbox.openapi import openapi_bytes
from models import resources as r

DOC: dict[str, Any] = json.loads(openapi_bytes())
SCHEMAS: dict[str, Any] = DOC["components"]["schemas"]

# read model -> document schema (same resource)
PAIRS: list[tuple[type[BaseModel], str]] = [
    (r.User, "User"),
    (r.Queue, "Queue"),
    (r.Skill, "Skill"),
    (r.Team, "Team"),
    (r.CallerIdGroup, "CallerIdGroup"),
    (r.Campaign, "Campaign"),
    (r.Message, "Message"),
    (r.Number, "Number"),
    (r.Balance, "Balance"),
    (r.CdrUser, "CdrUser"),
    (r.ChannelAccount, "ChannelAccount"),
    (r.CallData, "CallData"),
    (r.ConversationData, "ConversationData"),
    (r.HlrLookupData, "HlrLookupData"),
    (r.SmsData, "SmsData"),
    (r.CdrRef, "CdrRef"),
    (r.Lead, "Lead"),
    (r.Conversation, "Conversation"),
    (r.ScheduledCallback, "ScheduledCallback"),
    (r.WebhookFailure, "WebhookFailure"),
    (r.WhatsappTemplate, "WhatsappTemplate"),
    (r.CannedMessage, "CannedMessage"),
    (r.WrapupCode, "WrapupCode"),
    (r.CallRef, "IdRef"),
    (r.SmsRef, "IdRef"),
]
# Fields a model lists that a not-shown document schema leaves open (kept as extras there).
COMMON_CDR = {"id", "type", "subtype", "disposition", "from", "to", "user", "cost", "tags"}


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def json_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema admits (object for $ref'd objects; null where nullable)."""
    schema = resolve(schema)
    out: set[str] = set()
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, []):
            out |= json_types(branch)
    kind = schema.get("type")
    if isinstance(kind, list):
        out |= set(kind)
    elif kind:
        out.add(kind)
    if "const" in schema:
        out.add(type_of(schema["const"]))
    if "enum" in schema:
        out |= {type_of(v) for v in schema["enum"]}
    if "properties" in schema:
        out.add("object")
    if "integer" in out:
        out.add("number")
    return out


def type_of(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), "null"
    )


def properties(schema: dict[str, Any]) -> dict[str, Any]:
    schema = resolve(schema)
    props = dict(schema.get("properties", {}))
    for key in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(key, []):
            props.update(properties(branch))
    return props


def model_types(annotation: Any) -> set[str]:
    """The JSON types a pydantic field accepts, from its annotation."""
    import datetime
    import decimal
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return model_types(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(model_types(a) for a in typing.get_args(annotation)))
    if origin is typing.Literal:
        return {type_of(v) for v in typing.get_args(annotation)}
    if origin in (list, tuple):
        return {"array"}
    if origin is dict or annotation is dict:
        return {"object"}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {"object"}
    simple = {
        str: {"string"},
        int: {"integer", "number"},
        float: {"number", "integer"},
        bool: {"boolean"},
        type(None): {"null"},
        datetime.datetime: {"string"},
        decimal.Decimal: {"string", "number", "integer"},
        typing.Any: {"string", "number", "integer", "boolean", "object", "array", "null"},
    }
    return simple.get(annotation, {"string", "number", "integer", "boolean", "object", "array"})


def compare(model: type[BaseModel], schema_name: str, path: str) -> list[str]:
    problems: list[str] = []
    props = properties({"$ref": f"#/components/schemas/{schema_name}"})
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    for name in sorted(set(props) - set(fields)):
        problems.append(f"{path}.{name}: in the document, not in {model.__name__}")
    for name in sorted(set(fields) - set(props)):
        problems.append(f"{path}.{name}: in {model.__name__}, not in the document")
    for name in sorted(set(props) & set(fields)):
        doc_types = json_types(props[name])
        ours = model_types(fields[name].annotation)
        if not (doc_types - {"null"}) <= ours:
            problems.append(f"{path}.{name}: document {sorted(doc_types)} vs model {sorted(ours)}")
    return problems


@pytest.mark.parametrize(("model", "schema"), PAIRS, ids=[f"{m.__name__}-{s}" for m, s in PAIRS])
def test_read_model_and_document_schema_agree(model: type[BaseModel], schema: str) -> None:
    assert compare(model, schema, schema) == []


def test_cdr_common_fields_and_endpoints_agree() -> None:
    cdr = {(f.alias or n) for n, f in r.Cdr.model_fields.items()}
    assert cdr == set(properties({"$ref": "#/components/schemas/CdrCommon"}))
    assert cdr >= COMMON_CDR
    endpoint = {(f.alias or n) for n, f in r.CdrEndpoint.model_fields.items()}
    assert endpoint == set(properties({"$ref": "#/components/schemas/CdrEndpoint"}))


def test_the_comparison_notices_a_drift() -> None:
    class Drifted(r.ApiModel):
        id: int
        name: int  # the document says string
        nickname: str | None = None  # the document has no such field

    problems = compare(Drifted, "Team", "Team")
    assert any("Team.name: document" in p for p in problems)
    assert any("Team.nickname: in Drifted" in p for p in problems)
