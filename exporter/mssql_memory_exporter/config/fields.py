"""Field types and constants shared by the config models: names, labels, hosts, seconds, drivers."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
)
from pydantic_core import PydanticCustomError

from ..scrape.scrape_metrics import TARGET_SERIES_LABELS

TARGET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
TARGET_NAME_MAX = 128

# Label names the exporter itself puts on samples (design.md metric contract). A constant label with one
# of these names would make a sample carry the same label twice, which Prometheus rejects.
# Prometheus attaches these to every scraped series; an exported label of the same name gets renamed.
PROMETHEUS_TARGET_LABELS = frozenset({"job", "instance"})

# Label names a target's series carry (its collectors' declared labels and the probe's own, read from the
# declarations in scrape_metrics.py): a constant label of the same name would be there twice.
RESERVED_LABELS = TARGET_SERIES_LABELS

ODBC18 = "ODBC Driver 18 for SQL Server"
ODBC17 = "ODBC Driver 17 for SQL Server"
FREETDS = "FreeTDS"

DriverChoice = Literal["auto", "odbc18", "odbc17", "freetds"]
Encryption = Literal["off", "request", "require", "strict"]
DriverKind = Literal["odbc18", "odbc17", "freetds"]


def _check_label_name(name: str) -> str:
    if name.startswith("__"):
        raise PydanticCustomError("label_name", "label names starting with __ are reserved by Prometheus")
    if name in PROMETHEUS_TARGET_LABELS:
        raise PydanticCustomError(
            "label_name",
            "label {name} is Prometheus' own target label (it would be renamed exported_{name}); set it "
            "with relabeling in Prometheus instead",
            {"name": name},
        )
    if name in RESERVED_LABELS:
        raise PydanticCustomError(
            "label_name",
            "label {name} is set by the exporter itself; choose another name",
            {"name": repr(name)},
        )
    return name


def control_character(value: str) -> str | None:
    """The first control character in `value`, described (U+0000 at position 4), or None."""
    for index, char in enumerate(value):
        if ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0:
            return f"U+{ord(char):04X} at position {index + 1}"
    return None


def _no_control_characters(value: str) -> str:
    # The ODBC drivers are C code: a NUL ends the string there (a user name "expo\0rter" logged in as
    # "expo"), and other control characters end lines in freetds.conf or logs. None belongs in a name.
    found = control_character(value)
    if found is not None:
        raise PydanticCustomError(
            "control_character", "contains a control character ({found}); remove it", {"found": found}
        )
    return value


TargetName = Annotated[str, Field(max_length=TARGET_NAME_MAX, pattern=TARGET_NAME_PATTERN)]
LabelName = Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$"), AfterValidator(_check_label_name)]
# Values end up inside `Server=` and friends; characters that would change its meaning are refused
# here rather than quoted, because no driver accepts them in a host name anyway.
HostName = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9_.:%\[\]-]+$")]
# SQL Server instance names: at most 16 characters, letters/digits/_/$/#, not starting with a digit or $.
InstanceName = Annotated[str, Field(pattern=r"^[A-Za-z_#][A-Za-z0-9_#$]{0,15}$")]
SqlName = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_no_control_characters)]
# A path the exporter opens (password_file, ca_file): the same rule, checked before the file is looked at.
PathText = Annotated[str, Field(min_length=1), AfterValidator(_no_control_characters)]
Seconds = Annotated[float, Field(gt=0)]


# `rack: 12` is a label value of "12", not a type error: the one place numbers become strings.
LabelValue = Annotated[str, Field(strict=False)]


class Strict(BaseModel):
    # YAML turns `rack: 12` into an int; accepting it as "12" is what an operator expects.
    model_config = ConfigDict(
        extra="forbid", frozen=True, coerce_numbers_to_str=True, allow_inf_nan=False, strict=True
    )
