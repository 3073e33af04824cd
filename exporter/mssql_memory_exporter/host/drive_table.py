"""Which ATA attributes mean what, per drive family.

Vendors reuse attribute numbers for unrelated things (241 is LBAs on Samsung, 32 MiB units on Intel and
GiB on Phison; 202 is a wear figure on Micron and an exception status on Samsung), so the number alone
says nothing. smartctl names each attribute from its drive database, and names the drive's family from
the same database; a figure is used only when both the family and the attribute's name are in this
table. A drive whose family is not here exports health but no wear and no bytes: a wrong unit would be
worse than none, because it would pass for a measurement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

MIB = 2**20
GIB = 2**30


class Meaning(Enum):
    HOST_WRITTEN = "host_written"  # bytes the host wrote to the drive, in the unit given
    NAND_WRITTEN = "nand_written"  # bytes the drive programmed into flash, in the unit given
    LIFE_REMAINING = "life_remaining"  # normalized value: percent of rated life left (100 new)
    SPARE = "spare"  # normalized value: percent of spare blocks left; its threshold is the spare threshold
    HOST_PAGES = "host_pages"  # NAND pages programmed for host writes (raw count)
    BACKGROUND_PAGES = "background_pages"  # NAND pages programmed by the drive itself (GC, wear levelling)


# The unit of a byte counter: "lba" is the drive's logical sector size (smartctl's logical_block_size),
# a number is a fixed count of bytes per unit.
Unit = int | str


@dataclass(frozen=True)
class Attribute:
    meaning: Meaning
    unit: Unit | None = None  # bytes per raw unit, for the byte counters


@dataclass(frozen=True)
class Family:
    name: str  # as the docs name it
    pattern: re.Pattern[str]  # matched against smartctl's model_family, whole
    attributes: dict[str, Attribute]


# Intel's data center SATA drives: 233 counts down from 100 as the rated program/erase cycles are used,
# 232 is the reserve left, 241/243 count 32 MiB units (Intel's datasheets for the S3500, S3520, S3610,
# S3700 and S4500/S4600 families; smartctl names them Host_Writes_32MiB and NAND_Writes_32MiB).
_INTEL_DC = {
    "Media_Wearout_Indicator": Attribute(Meaning.LIFE_REMAINING),
    "Available_Reservd_Space": Attribute(Meaning.SPARE),
    "Host_Writes_32MiB": Attribute(Meaning.HOST_WRITTEN, 32 * MIB),
    "NAND_Writes_32MiB": Attribute(Meaning.NAND_WRITTEN, 32 * MIB),
}

FAMILIES: tuple[Family, ...] = (
    Family(
        "Intel 730 and DC S35x0/3610/3700 Series SSDs",
        re.compile(r"Intel 730 and DC S35x0/3610/3700 Series SSDs"),
        _INTEL_DC,
    ),
    Family("Intel S3520 Series SSDs", re.compile(r"Intel S3520 Series SSDs"), _INTEL_DC),
    Family(
        "Intel S4510/S4610/S4500/S4600 Series SSDs",
        re.compile(r"Intel S4510/S4610/S4500/S4600 Series SSDs"),
        _INTEL_DC,
    ),
    # Micron 5100/5200/5300/5400: 202 counts down from 100; 246 counts logical sectors; 247 and 248 count
    # NAND pages programmed for the host and by the drive's own background work, so write amplification
    # is (247 + 248) / 247 (Micron's technical note on SMART attributes). The page size is not reported,
    # so the pages give a ratio, not NAND bytes. smartctl 7.2 and 7.3 spell the family two ways.
    Family(
        "Micron 5100 / 52x0 / 5300 / 5400 SSDs",
        re.compile(r"Micron 5100( Pro)? / 52x0 / 5300( / 5400)? SSDs"),
        {
            "Percent_Lifetime_Remain": Attribute(Meaning.LIFE_REMAINING),
            "Total_LBAs_Written": Attribute(Meaning.HOST_WRITTEN, "lba"),
            "Host_Program_Page_Count": Attribute(Meaning.HOST_PAGES),
            "Bckgnd_Program_Page_Cnt": Attribute(Meaning.BACKGROUND_PAGES),
        },
    ),
    # Samsung's SATA drives (SM843T, PM883, PM893, 8xx): 177 counts down from 100 with the average erase
    # count against the rated one, 241 counts logical sectors. 251 NAND_Writes is left out: Samsung does
    # not document its unit.
    Family(
        "Samsung based SSDs",
        re.compile(r"Samsung based SSDs"),
        {
            "Wear_Leveling_Count": Attribute(Meaning.LIFE_REMAINING),
            "Total_LBAs_Written": Attribute(Meaning.HOST_WRITTEN, "lba"),
        },
    ),
    # Phison controllers (Kingston A400 and others): 231 is life left in percent, 241 and 233 count GiB
    # written by the host and to flash.
    Family(
        "Phison Driven SSDs",
        re.compile(r"Phison Driven SSDs"),
        {
            "SSD_Life_Left": Attribute(Meaning.LIFE_REMAINING),
            "Lifetime_Writes_GiB": Attribute(Meaning.HOST_WRITTEN, GIB),
            "Flash_Writes_GiB": Attribute(Meaning.NAND_WRITTEN, GIB),
        },
    ),
)


def family_of(model_family: str | None) -> Family | None:
    """The table's entry for smartctl's model_family, None when the family is not understood."""
    if not model_family:
        return None
    for family in FAMILIES:
        if family.pattern.fullmatch(model_family):
            return family
    return None
