"""Drive health: which drives smartctl reads on this host, how, and how often."""

from __future__ import annotations

import re
from typing import Annotated, Any, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .errors import error_at
from .fields import TARGET_NAME_MAX, TARGET_NAME_PATTERN, Seconds, Strict

DriveName = Annotated[str, Field(max_length=TARGET_NAME_MAX, pattern=TARGET_NAME_PATTERN)]
# The smartctl program: a path or name, or a command that runs it, such as [sudo, -n, /usr/sbin/smartctl]
# for the sudoers rule in deploy/sudoers/ (the reader's fixed arguments follow it).
SmartctlCommand = Annotated[str, Field(min_length=1)] | Annotated[
    list[Annotated[str, Field(min_length=1)]], Field(min_length=1)
]


def command_words(command: str | list[str]) -> tuple[str, ...]:
    return (command,) if isinstance(command, str) else tuple(command)

# Only options that say how to reach the drive: the reader's own options (-x, --json, -n standby) are
# fixed, and anything else (-s, -t, -o, --set ...) would change the drive rather than read it. The
# fixed set is also what lets a sudoers rule name the exact commands (docs/permissions.md).
_VALUE_OPTIONS = ("-d", "--device", "-T", "--tolerance")


def _check_device_args(args: list[str]) -> None:
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in _VALUE_OPTIONS:
            if index + 1 >= len(args) or args[index + 1].startswith("-"):
                raise error_at(("device_args", index), f"{arg} needs a value (for example -d megaraid,0)")
            index += 2
            continue
        if any(arg.startswith(option + "=") for option in _VALUE_OPTIONS if option.startswith("--")):
            index += 1
            continue
        raise error_at(
            ("device_args", index),
            f"{arg!r} is not allowed: only -d/--device TYPE and -T/--tolerance TYPE, which say how to reach "
            "the drive",
        )


class DriveConfig(Strict):
    """One drive: its name (the `device` label, and how pools name it) and how smartctl reaches it."""

    name: DriveName
    # The device node smartctl opens; /dev/<name> by default. Behind a RAID controller several drives
    # share one node and differ in device_args (-d megaraid,N).
    device: Annotated[str, Field(min_length=1)] | None = None
    device_args: list[str] = Field(default_factory=list)
    smartctl: SmartctlCommand | None = None  # this drive's smartctl, if not the default

    @field_validator("device_args", mode="before")
    @classmethod
    def _split_by_yaml(cls, value: Any) -> Any:
        # In a YAML flow list, [-d, megaraid,0] is three items: "-d", "megaraid" and the number 0.
        if isinstance(value, list) and any(isinstance(item, int | float) for item in value):
            raise PydanticCustomError(
                "device_args",
                'a number among the arguments: quote a TYPE that has a comma, as in [-d, "megaraid,0"]',
            )
        return value

    @model_validator(mode="after")
    def _args(self) -> Self:
        _check_device_args(self.device_args)
        return self

    @property
    def device_path(self) -> str:
        if self.device is not None:
            return self.device
        # smartctl for Windows spells \\.\PhysicalDriveN as /dev/pdN.
        windows = re.fullmatch(r"physicaldrive(\d+)", self.name, re.IGNORECASE)
        return f"/dev/pd{windows.group(1)}" if windows else f"/dev/{self.name}"


class DriveHealthConfig(Strict):
    """smartctl readings of the host's drives, each on its own slow cadence in a background thread."""

    smartctl: SmartctlCommand = "smartctl"
    interval_seconds: Seconds = 600.0
    timeout_seconds: Seconds = 60.0
    # A serial number is not a secret, but some sites keep asset data out of monitoring.
    redact_serial: bool = False
    drives: Annotated[list[DriveConfig], Field(min_length=1)]

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        if self.timeout_seconds >= self.interval_seconds:
            raise error_at(
                ("timeout_seconds",),
                f"{self.timeout_seconds:g} must be less than interval_seconds ({self.interval_seconds:g})",
            )
        names: dict[str, int] = {}
        reached: dict[tuple[str, tuple[str, ...]], int] = {}
        for index, drive in enumerate(self.drives):
            if drive.name in names:
                raise error_at(
                    ("drives", index, "name"),
                    f"{drive.name} is named twice (also drives.{names[drive.name]})",
                )
            names[drive.name] = index
            # The same node with the same arguments is the same drive under two names: its bytes would
            # count twice in a pool.
            key = (drive.device_path, tuple(drive.device_args))
            if key in reached:
                raise error_at(
                    ("drives", index, "device"),
                    f"{drive.device_path} {' '.join(drive.device_args)} is the same drive as "
                    f"drives.{reached[key]}".replace("  ", " "),
                )
            reached[key] = index
        return self

    def names(self) -> set[str]:
        return {drive.name for drive in self.drives}
