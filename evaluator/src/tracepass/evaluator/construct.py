"""Building pydantic models without validation, for the hot paths that already hold valid
values (scoring, assembly, usage figures). Its own module so that the modules the data
model imports (`cost_latency.py`) can use it without importing `models`."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["construct_unchecked"]


_M = TypeVar("_M", bound=BaseModel)
# BaseModel's four slots, set through their descriptors (a little cheaper than
# object.__setattr__, which looks the descriptor up by name on every call).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
# Per class: its fields-set and its `__new__`, resolved once (`object.__new__` for every
# model here): `cls.__new__` is looked up through the metaclass on every call, about a
# quarter of the cost of building a small model.
_all_fields: dict[type[BaseModel], tuple[set[str], Any]] = {}


def construct_unchecked(cls: type[_M], values: dict[str, Any]) -> _M:
    """Build a model from values that are already valid, with *every* field given.

    For the scoring hot path only: `model_construct` walks the fields in Python to fill
    defaults (tens of µs per result object); here the caller passes complete dicts built
    from validated inputs, so nothing is checked and nothing is filled.

    Every instance of a class shares one fields-set object (all fields are set): the
    models are frozen, and pydantic copies that set before changing it (`model_copy`)."""
    known = _all_fields.get(cls)
    if known is None:
        known = _all_fields[cls] = (set(cls.model_fields), cls.__new__)
    fields_set, new = known
    obj: _M = new(cls)
    _set_dict(obj, values)
    _set_fields_set(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj
