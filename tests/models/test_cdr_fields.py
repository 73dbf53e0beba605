"""The CDR field table agrees with the API's CDR model and refuses a shape it cannot build."""

from __future__ import annotations

import datetime as dt
import types
from decimal import Decimal
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from models.cdr_fields import CDR_FIELDS, CdrField
from models.resources import Cdr

# The Python type a value of each kind has in the tolerant API model.
KIND_TYPES: dict[str, object] = {
    "text": str,
    "bool": bool,
    "int": int,
    "float": float,
    "decimal": Decimal,
    "timestamp": dt.datetime,
    "text_list": list[str],
}


def _members(annotation: Any) -> list[Any]:
    """The members of a union (`X | Y | None`), a Literal counted as the type of its values."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _members(a)]
    if get_origin(annotation) is Literal:
        return [type(v) for v in get_args(annotation)]
    return [annotation]


def _leaves(model: type[BaseModel], prefix: str = "") -> dict[str, set[Any]]:
    """Every leaf path of a model (by its JSON names) and the types its value may have; a CDR's
    `data` (one model per type) is left out."""
    out: dict[str, set[Any]] = {}
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        if model is Cdr and path == "data":
            continue
        members = [m for m in _members(info.annotation) if m is not type(None)]
        nested = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        if nested:
            (inner,) = nested
            out |= _leaves(inner, path + ".")
        else:
            out[path] = set(members)
    return out


def _data_model(cdr_type: str) -> type[BaseModel]:
    """The model the API resource gives the `data` of a CDR of this type."""
    data = Cdr.model_validate({"id": "x", "type": cdr_type, "data": {}}).data
    assert isinstance(data, BaseModel), cdr_type
    return type(data)


@pytest.mark.parametrize("cdr_type", [t.name for t in CDR_FIELDS.types])
def test_the_field_tables_paths_are_the_api_models_fields(cdr_type: str) -> None:
    model = _leaves(Cdr)
    model |= {f"data.{p}": t for p, t in _leaves(_data_model(cdr_type)).items()}
    table = {f.path: f for f in (*CDR_FIELDS.top, *CDR_FIELDS.of_type(cdr_type))}
    assert sorted(table) == sorted(model)
    for path, f in table.items():
        assert KIND_TYPES[f.kind] in model[path], (path, f.kind, model[path])


def test_the_api_model_stays_tolerant() -> None:
    # Extra fields are kept, not refused: the table does not make the resource model strict.
    cdr = Cdr.model_validate({"id": "x", "type": "call", "ring": 3, "data": {"durations": {}}})
    assert cdr.model_extra == {"ring": 3}


def test_money_is_an_exact_decimal_and_every_field_has_a_meaning() -> None:
    (cost,) = [f for f in CDR_FIELDS.fields if f.kind == "decimal"]
    assert (cost.path, cost.precision, cost.scale) == ("cost", 18, 6)
    assert all(f.description for f in CDR_FIELDS.fields)
    assert all(f.per_type for f in CDR_FIELDS.common)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (CdrField("data.ring", "int", "ring", "Ring.", "fax"), "must be under `data`"),
        (CdrField("data.ring", "int", "ring", "Ring."), "needs its cdr_type"),
        (CdrField("cost.units", "int", "cost_units", "Units."), "under another field's path"),
        (CdrField("user.name.first", "text", "first", "First."), "under another field's path"),
        (CdrField("user.mail", "text", "user_email", "Mail."), "same column"),
    ],
)
def test_a_shape_the_builders_cannot_build_is_refused(field: CdrField, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CDR_FIELDS.with_field(field)


def test_a_decimal_field_names_its_scale() -> None:
    with pytest.raises(ValueError, match="precision and scale"):
        CdrField("amount", "decimal", "amount", "Amount.")
    with pytest.raises(ValueError, match="precision and scale"):
        CdrField("count", "int", "count", "Count.", precision=18, scale=6)
