"""Real smartctl outputs of every SSD family in tests/smartctl_testdata, read into the exported metrics.

Each expected value is worked out here from the fixture's own JSON (the raw number is quoted next to the
arithmetic), not taken from the parser: the metrics are produced by the same monitor and exposition the
exporter serves, fed the fixture's bytes and exit status as smartctl would print them.
"""

from __future__ import annotations

import copy
import json

import pytest
from mssql_memory_exporter.config import DriveHealthConfig
from mssql_memory_exporter.host import smartctl
from mssql_memory_exporter.host.drive_health import DriveMonitor
from mssql_memory_exporter.host.drive_metrics import drive_families
from mssql_memory_exporter.host.drive_parse import parse
from mssql_memory_exporter.host.drive_table import FAMILIES

from tests.conftest import Samples, exposition, samples_of
from tests.fake_smartctl import FIXTURES, fixture

MIB = 2**20
GIB = 2**30


def read(doc: dict, status: int | None = None, redact: bool = False) -> Samples:
    """The /metrics samples for one drive named "d" whose smartctl printed `doc` and exited `status`."""
    out = json.dumps(doc).encode()
    exit_status = doc["smartctl"]["exit_status"] if status is None else status
    config = DriveHealthConfig.model_validate({"redact_serial": redact, "drives": [{"name": "d"}]})
    monitor = DriveMonitor(config, run=lambda argv, timeout: smartctl.interpret(exit_status, out))
    monitor.read_all()
    return samples_of(exposition(drive_families(monitor, {})))


def of(samples: Samples, name: str, **extra: str) -> float | None:
    """The drive's sample `name` (with `extra` labels); None when it is not exported."""
    found = [
        v
        for (n, labels), v in samples.items()
        if n == name
        and dict(labels).get("device") == "d"
        and all(dict(labels).get(k) == w for k, w in extra.items())
    ]
    assert len(found) <= 1, (name, found)
    return found[0] if found else None


def labels_of(samples: Samples, name: str) -> dict[str, str]:
    (labels,) = [dict(lb) for n, lb in samples if n == name]
    return labels


WEAR_AND_BYTES = (
    "mssql_drive_life_used_ratio",
    "mssql_drive_host_written_bytes_total",
    "mssql_drive_nand_written_bytes_total",
    "mssql_drive_write_amplification_ratio",
    "mssql_drive_nand_program_pages_total",
)


# --- NVMe: the health log is the same on every vendor ---------------------------------------------------

NVME_CASES = [
    # fixture, data_units_written, percentage_used, spare, spare threshold, power_on_hours, temperature
    ("INTEL_SSDPE2KX080T8_1.json", 184_919_244, 0, 100, 10, 12_164, 29),
    ("KXG60ZNV512G_TOSHIBA_2.json", 3_861_802, 1, 100, 10, 12_173, 37),
    ("nvme-null-Micron_7300_MTFDHBE1T6TDG-nvme0.json", 338_104, 0, 100, 5, 5_100, 22),
    ("nvme-null-Micron_7400_MTFDKCB1T9TDZ-nvme10.json", 725_355_323, 5, 100, 10, 9_099, 33),
    ("SAMSUNG_MZQLB1T9HAJR-00007_19.json", 44_965_392, 0, 100, 10, 20_701, 40),
    ("nvme-null-CT250P2SSD8-nvme0.json", 1_002_900, 0, 100, 5, 10_147, 26),
    ("nvme-null-HUSMR7632BHP301-nvme0.json", 2_824_080_560, 5, 100, 10, 482, 40),
    ("nvme-null-MTFDHAX1T6MCE-1AN1ZABYY-nvme0.json", 2_184_152_450, 69, 100, 5, 29_891, 32),
    ("nvme-null-INTEL_MEMPEK1W032GA-nvme0.json", 4_744_607, 1, 100, 0, 41_159, 31),
]


@pytest.mark.parametrize(("name", "units", "used", "spare", "threshold", "hours", "temp"), NVME_CASES)
def test_nvme_health_log(name, units, used, spare, threshold, hours, temp):
    got = read(fixture(name))
    # data_units_written counts units of 1,000 x 512 bytes, whatever the drive's sector size.
    assert of(got, "mssql_drive_host_written_bytes_total") == units * 512_000
    assert of(got, "mssql_drive_life_used_ratio") == pytest.approx(used / 100)
    assert of(got, "mssql_drive_available_spare_ratio") == pytest.approx(spare / 100)
    assert of(got, "mssql_drive_available_spare_threshold_ratio") == pytest.approx(threshold / 100)
    assert of(got, "mssql_drive_power_on_seconds_total") == hours * 3600
    assert of(got, "mssql_drive_temperature_celsius") == temp
    assert of(got, "mssql_drive_critical_warning") == 0
    assert of(got, "mssql_drive_media_errors_total") == 0
    assert of(got, "mssql_drive_smart_passed") == 1
    # NVMe has no standard NAND-writes field: no write amplification is claimed.
    assert of(got, "mssql_drive_nand_written_bytes_total") is None
    assert of(got, "mssql_drive_write_amplification_ratio") is None
    info = labels_of(got, "mssql_drive_info")
    assert info["protocol"] == "nvme" and info["kind"] == "ssd"
    assert info["model"] == fixture(name)["model_name"]


def test_nvme_critical_warning_and_failing_health_are_exported():
    # Samsung MZWLL3T2HAJQ: critical_warning 16 (volatile memory backup failed), smart_status.passed false,
    # and smartctl exited 8 (bit 3: "DISK FAILING").
    got = read(fixture("nvme-null-SAMSUNG_MZWLL3T2HAJQ-00005-nvme0.json"))
    assert of(got, "mssql_drive_critical_warning") == 16
    assert of(got, "mssql_drive_smart_passed") == 0
    assert of(got, "mssql_drive_smartctl_finding", finding="failing") == 1
    assert of(got, "mssql_drive_smartctl_finding", finding="error_log") == 0
    assert of(got, "mssql_drive_read_success") == 1  # a finding is news about the drive, not a failed read
    assert of(got, "mssql_drive_host_written_bytes_total") == 147_556_750 * 512_000


def test_percentage_used_past_100_is_not_clamped():
    doc = copy.deepcopy(fixture("nvme-null-MTFDHAX1T6MCE-1AN1ZABYY-nvme0.json"))
    doc["nvme_smart_health_information_log"]["percentage_used"] = 137  # the spec allows up to 255
    assert of(read(doc), "mssql_drive_life_used_ratio") == pytest.approx(1.37)


# --- ATA: by drive family and attribute name ------------------------------------------------------------

INTEL_CASES = [
    # fixture, 233 normalized, 232 normalized and threshold, 241 raw, 243 raw, power-on hours, temperature
    (
        "sat-Intel_730_and_DC_S35x0_3610_3700_Series_SSDs-INTEL_SSDSC2BB016T4-sdf.json",
        15,
        100,
        10,
        62_594_010,
        138_721_860,
        67_329,
        23,
    ),
    (
        "sat-Intel_S3520_Series_SSDs-INTEL_SSDSC2BB016T7-sdc.json",
        97,
        99,
        10,
        2_772_743,
        10_636_875,
        43_494,
        26,
    ),
    (
        "sat-Intel_S4510_S4610_S4500_S4600_Series_SSDs-INTEL_SSDSC2KB019T8-sdr.json",
        99,
        100,
        10,
        2_856_519,
        12_454_492,
        17_704,
        25,
    ),
]


@pytest.mark.parametrize(
    ("name", "wearout", "spare", "threshold", "host", "nand", "hours", "temp"), INTEL_CASES
)
def test_intel_data_center_sata(name, wearout, spare, threshold, host, nand, hours, temp):
    got = read(fixture(name))
    # 233 Media_Wearout_Indicator counts down from 100: 15 left means 85 % used.
    assert of(got, "mssql_drive_life_used_ratio") == pytest.approx((100 - wearout) / 100)
    assert of(got, "mssql_drive_available_spare_ratio") == pytest.approx(spare / 100)
    assert of(got, "mssql_drive_available_spare_threshold_ratio") == pytest.approx(threshold / 100)
    # 241 Host_Writes_32MiB and 243 NAND_Writes_32MiB: units of 32 x 2^20 = 33,554,432 bytes.
    assert of(got, "mssql_drive_host_written_bytes_total") == host * 33_554_432
    assert of(got, "mssql_drive_nand_written_bytes_total") == nand * 33_554_432
    assert of(got, "mssql_drive_write_amplification_ratio") == pytest.approx(nand / host)
    assert of(got, "mssql_drive_power_on_seconds_total") == hours * 3600
    assert of(got, "mssql_drive_temperature_celsius") == temp
    assert labels_of(got, "mssql_drive_info")["family"] == fixture(name)["model_family"]


def test_intel_730_write_amplification_worked_out():
    # The docs' worked example: 138,721,860 / 62,594,010 = 2.216 NAND bytes per host byte.
    got = read(fixture(INTEL_CASES[0][0]))
    assert of(got, "mssql_drive_write_amplification_ratio") == pytest.approx(2.2162, abs=1e-4)
    assert (
        of(got, "mssql_drive_host_written_bytes_total") == 2_100_306_452_152_320
    )  # 62,594,010 x 33,554,432: 2.1 PB


MICRON_CASES = [
    # fixture, 202 normalized, 246 raw (LBAs of 512 bytes), 247 raw, 248 raw, hours, temperature
    (
        "sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK1T9TDS-sda.json",
        100,
        130_006_927_240,
        4_062_707_571,
        8_824_675_195,
        4_175,
        24,
    ),
    (
        "sat-Micron_5100___52x0___5300___5400_SSDs-Micron_5300_MTFDDAK480TDS-sda.json",
        100,
        7_916_536_962,
        255_173_508,
        24_600_708,
        19_394,
        27,
    ),
]


@pytest.mark.parametrize(("name", "remain", "lbas", "host_pages", "bg_pages", "hours", "temp"), MICRON_CASES)
def test_micron_5x00_sata(name, remain, lbas, host_pages, bg_pages, hours, temp):
    got = read(fixture(name))
    assert fixture(name)["logical_block_size"] == 512
    assert of(got, "mssql_drive_life_used_ratio") == pytest.approx((100 - remain) / 100)
    assert of(got, "mssql_drive_host_written_bytes_total") == lbas * 512
    # Micron: write amplification = (247 host pages + 248 background pages) / 247.
    assert of(got, "mssql_drive_write_amplification_ratio") == pytest.approx(
        (host_pages + bg_pages) / host_pages
    )
    assert of(got, "mssql_drive_nand_program_pages_total", origin="host") == host_pages
    assert of(got, "mssql_drive_nand_program_pages_total", origin="background") == bg_pages
    # The page size is not reported: no NAND bytes are made up from the page count.
    assert of(got, "mssql_drive_nand_written_bytes_total") is None
    assert of(got, "mssql_drive_power_on_seconds_total") == hours * 3600
    assert of(got, "mssql_drive_temperature_celsius") == temp


def test_micron_5300_write_amplification_worked_out():
    # (4,062,707,571 + 8,824,675,195) / 4,062,707,571 = 3.172
    got = read(fixture(MICRON_CASES[0][0]))
    assert of(got, "mssql_drive_write_amplification_ratio") == pytest.approx(3.1721, abs=1e-4)


SAMSUNG_CASES = [
    # fixture, 177 normalized, 241 raw (LBAs of 512 bytes), hours, temperature
    ("SAMSUNG_MZ7WD240HAFV-00003_21.json", 91, 216_456_537_880, 84_619, 27),
    ("sat-Samsung_based_SSDs-SAMSUNG_MZ7L3240HCHQ-00A07-sda.json", 98, 652_566_252, 10_106, 30),
]


@pytest.mark.parametrize(("name", "wear", "lbas", "hours", "temp"), SAMSUNG_CASES)
def test_samsung_sata(name, wear, lbas, hours, temp):
    got = read(fixture(name))
    assert of(got, "mssql_drive_life_used_ratio") == pytest.approx((100 - wear) / 100)
    assert of(got, "mssql_drive_host_written_bytes_total") == lbas * 512
    # 251 NAND_Writes is reported, in a unit Samsung does not document: not exported.
    assert of(got, "mssql_drive_nand_written_bytes_total") is None
    assert of(got, "mssql_drive_write_amplification_ratio") is None
    assert of(got, "mssql_drive_power_on_seconds_total") == hours * 3600
    assert of(got, "mssql_drive_temperature_celsius") == temp


def test_phison_kingston_partial_read_with_full_table():
    # smartctl exited 4 (bit 2: a command failed) with the whole attribute table: exported, marked partial.
    name = "sat-Phison_Driven_SSDs-KINGSTON_SA400M8120G-sda.json"
    assert fixture(name)["smartctl"]["exit_status"] == 4
    got = read(fixture(name))
    assert of(got, "mssql_drive_read_success") == 1
    assert of(got, "mssql_drive_reading_partial") == 1
    # 231 SSD_Life_Left normalized 98; 241 Lifetime_Writes_GiB 398; 233 Flash_Writes_GiB 979.
    assert of(got, "mssql_drive_life_used_ratio") == pytest.approx(0.02)
    assert of(got, "mssql_drive_host_written_bytes_total") == 398 * 1_073_741_824
    assert of(got, "mssql_drive_nand_written_bytes_total") == 979 * 1_073_741_824
    assert of(got, "mssql_drive_write_amplification_ratio") == pytest.approx(979 / 398)


# --- every fixture: families understood, hard disks without wear ----------------------------------------

ALL = sorted(p.name for p in FIXTURES.glob("*.json"))


def test_the_fixture_set_is_the_one_described():
    assert len(ALL) == 141


def test_every_ssd_family_in_the_fixtures_is_understood_and_hand_checked_above():
    hand_checked = {
        fixture(case[0]).get("model_family") for case in INTEL_CASES + MICRON_CASES + SAMSUNG_CASES
    }
    hand_checked.add("Phison Driven SSDs")
    ssd_families = set()
    for name in ALL:
        doc = fixture(name)
        if doc["device"]["protocol"] == "ATA" and doc.get("rotation_rate") == 0:
            ssd_families.add(doc.get("model_family"))
    assert ssd_families == hand_checked
    table = {family.name for family in FAMILIES}
    for family in ssd_families:
        assert (
            parse(fixture(next(n for n in ALL if fixture(n).get("model_family") == family))).family in table
        )


@pytest.mark.parametrize("name", ALL)
def test_every_fixture_reads(name):
    doc = fixture(name)
    reading = parse(doc)
    assert reading.model == (doc.get("model_name") or doc.get("scsi_model_name"))
    if "power_on_time" in doc:
        hours, minutes = doc["power_on_time"]["hours"], doc["power_on_time"].get("minutes", 0)
        assert reading.power_on_seconds == hours * 3600 + minutes * 60
    else:
        assert reading.power_on_seconds is None  # an old SAS disk that does not say
    if doc["device"]["protocol"] == "NVMe":
        assert reading.kind == "ssd"
        units = doc["nvme_smart_health_information_log"]["data_units_written"]
        assert reading.host_written_bytes == units * 512_000
    elif doc.get("rotation_rate", 0) > 0 or (doc.get("rotation_rate") is None and not reading.family):
        # Hard disks (and an old disk reporting no rotation rate, in no SSD family): health, no wear.
        assert reading.kind in ("hdd", "unknown")
        assert reading.life_used_ratio is None and reading.host_written_bytes is None
        assert reading.nand_written_bytes is None and reading.write_amplification is None
        assert reading.temperature_celsius == doc["temperature"]["current"]
    else:
        assert reading.kind == "ssd" and reading.family and reading.host_written_bytes


def test_a_hard_disk_exports_health_but_no_wear():
    # Seagate Constellation ES.3, 7,200 rpm: Seagate's 241 Total_LBAs_Written is in the table but means
    # nothing for endurance on a disk.
    got = read(fixture("sat-Seagate_Constellation_ES.3-ST1000NM0033-9ZM173-sdq.json"))
    for metric in WEAR_AND_BYTES:
        assert of(got, metric) is None, metric
    assert of(got, "mssql_drive_smart_passed") == 1
    assert labels_of(got, "mssql_drive_info")["kind"] == "hdd"
    assert of(got, "mssql_drive_temperature_celsius") is not None


def test_a_family_whose_units_are_unknown_exports_no_bytes_nor_wear():
    doc = copy.deepcopy(fixture("SAMSUNG_MZ7WD240HAFV-00003_21.json"))
    doc["model_family"] = "SandForce Driven SSDs"  # an SSD family the table does not hold
    got = read(doc)
    for metric in WEAR_AND_BYTES:
        assert of(got, metric) is None, metric
    info = labels_of(got, "mssql_drive_info")
    assert info["kind"] == "ssd" and info["family"] == ""
    assert of(got, "mssql_drive_power_on_seconds_total") == 84_619 * 3600  # health still exported


def test_an_ssd_missing_from_smartctls_database_exports_no_bytes():
    doc = copy.deepcopy(fixture("SAMSUNG_MZ7WD240HAFV-00003_21.json"))
    del doc["model_family"]  # smartctl without the drive in its database prints no family
    got = read(doc)
    assert of(got, "mssql_drive_host_written_bytes_total") is None


def test_ata_device_statistics_are_preferred_to_vendor_attributes():
    doc = copy.deepcopy(fixture(INTEL_CASES[0][0]))
    # As smartctl 7.3 prints the General Statistics (page 1) and Solid State (page 7) pages with -x.
    doc["ata_device_statistics"] = {
        "pages": [
            {
                "number": 1,
                "name": "General Statistics",
                "revision": 1,
                "table": [
                    {
                        "offset": 24,
                        "name": "Logical Sectors Written",
                        "size": 6,
                        "value": 4_000_000_000,
                        "flags": {"value": 192, "string": "CN--- ", "valid": True},
                    },
                ],
            },
            {
                "number": 7,
                "name": "Solid State Device Statistics",
                "revision": 1,
                "table": [
                    {
                        "offset": 8,
                        "name": "Percentage Used Endurance Indicator",
                        "size": 1,
                        "value": 16,
                        "flags": {"value": 192, "string": "CN--- ", "valid": True},
                    },
                ],
            },
        ]
    }
    got = read(doc)
    assert of(got, "mssql_drive_host_written_bytes_total") == 4_000_000_000 * 512  # sectors x 512
    assert of(got, "mssql_drive_life_used_ratio") == pytest.approx(0.16)  # not 233's 85 %


def test_scsi_ssd_endurance_indicator():
    doc = copy.deepcopy(fixture("HITACHI_H109060SESUN600G_9.json"))
    doc["rotation_rate"] = 0
    doc["scsi_percentage_used_endurance_indicator"] = 3
    got = read(doc)
    assert of(got, "mssql_drive_life_used_ratio") == pytest.approx(0.03)
    assert of(got, "mssql_drive_host_written_bytes_total") is None  # gigabytes_processed is not used
    assert of(got, "mssql_drive_media_errors_total") == 0  # read + write + verify uncorrected: 0 + 0 + 0


def test_serial_redacted_on_request():
    doc = copy.deepcopy(fixture(NVME_CASES[0][0]))
    doc["serial_number"] = "PHLJ123400AB8P0HGN"
    assert labels_of(read(doc), "mssql_drive_info")["serial"] == "PHLJ123400AB8P0HGN"
    redacted = read(doc, redact=True)
    assert all("serial" not in dict(labels) for _, labels in redacted)
    assert "PHLJ123400AB8P0HGN" not in exposition_text(doc, redact=True)


def exposition_text(doc: dict, redact: bool) -> str:
    out = json.dumps(doc).encode()
    config = DriveHealthConfig.model_validate({"redact_serial": redact, "drives": [{"name": "d"}]})
    monitor = DriveMonitor(config, run=lambda argv, timeout: smartctl.interpret(0, out))
    monitor.read_all()
    return exposition(drive_families(monitor, {}))


def test_family_label_is_the_tables_row_and_empty_family_still_exports_wear_and_bytes():
    """What docs/metrics.md says of `family`: the exporter's own row name, not smartctl's spelling; and
    `family=""` on every NVMe drive, which still exports its wear and its bytes written."""
    micron = read(fixture("sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK1T9TDS-sda.json"))
    assert labels_of(micron, "mssql_drive_info")["family"] == "Micron 5100 / 52x0 / 5300 / 5400 SSDs"
    names = sorted(p.name for p in FIXTURES.glob("*.json"))
    nvme = [name for name in names if fixture(name)["device"]["protocol"] == "NVMe"]
    assert len(nvme) > 10
    for name in nvme:
        got = read(fixture(name))
        assert labels_of(got, "mssql_drive_info")["family"] == "", name
        assert of(got, "mssql_drive_life_used_ratio") is not None, name
        assert of(got, "mssql_drive_host_written_bytes_total") is not None, name
