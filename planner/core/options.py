"""The shared bases of solver option schemas (a solver declares its own as
`options_model`, in its module, every one of them there: the core knows the protocol,
not the solvers): validated at the edge like every document (the service refuses a bad
option at the POST, 422 naming options.<key>, never in a job). StrictOptions: a JSON
`true` is not a count, `1.0` is not an integer; ModelOptions: numbers as a cost model
reads them (an integer where a float is asked is fine). A cost model that reads a
solver's options (models/mulayer.py, models/asymo.py) gets them parsed by
models/compilers.py with the solver's own `options_model` and names what it reads as a
Protocol, so models/ never imports solvers/."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.core.errors import from_pydantic


class StrictOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, strict=True)


class ModelOptions(BaseModel):
    """Options a cost model reads too (muLayer's, AsyMo's): not strict, as they always were."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class NoOptions(StrictOptions):
    """The solver takes no options."""


def parse_options(model: type[BaseModel], options: dict[str, Any]) -> Any:
    """`options` as `model`, or InputError naming options.<key> and the reason."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        raise from_pydantic(exc, prefix=("options",)) from None
