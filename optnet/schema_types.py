"""The input format's building blocks, shared by ``optnet.schema`` and the transport plug-ins'
own fields (``optnet.transports``), which ``optnet.schema`` imports."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False, le=1e18)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False, le=1e18)]


class Strict(BaseModel):
    """Unknown keys are errors, values are frozen, the docstring under a field documents it."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
