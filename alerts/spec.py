"""The thresholds spec (alerts/thresholds.yml), typed, loaded once for the rule and dashboard generators.

Every number the rules and dashboards use comes from here; nothing else may spell a threshold. The
models mirror the file key for key: a key the models do not know, a missing one, a ratio outside 0..1 or
a duration Prometheus would not read stops `make generate` with the key's path named, before a rule is
written. Generators read attributes (`spec.memory.lazy_writes_per_second.max`), so a misspelt key is a
type error rather than a string that fails at run time.

A site's partial file (`make mixin`, docs/mixin.md) is merged over the shipped file by `load_site` and
checked by these same models: there is no second schema for overrides.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from . import group_names

SPEC_PATH = Path(__file__).resolve().parent / "thresholds.yml"
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w|y)$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class SpecError(ValueError):
    pass


def duration_seconds(text: str) -> float:
    match = _DURATION.match(text)
    if match is None:
        raise SpecError(f"not a Prometheus duration: {text!r}")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def prometheus_duration(seconds: float) -> str:
    """Whole seconds as Prometheus writes a compound duration, largest unit first: 87000 -> "1d10m"."""
    left = int(seconds)
    if left != seconds or left <= 0:
        raise SpecError(f"not a whole positive number of seconds: {seconds!r}")
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def number(value: float) -> str:
    """A spec number as the rules, dashboards and docs print it: exactly as given, integers without a
    decimal point (a rounded 4 GiB step would lower every scaled PLE floor a little)."""
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _duration(text: str) -> str:
    duration_seconds(text)  # raises with the text named
    return text


def _positive(value: float) -> float:
    if not value > 0:
        raise ValueError(f"must be greater than 0, got {value!r}")
    return value


def _ratio(value: float) -> float:
    if not 0 <= value <= 1:
        raise ValueError(f"a ratio must be within 0..1, got {value!r}")
    return value


_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# Labels every alert gets from its rule or its series: a site label of the same name would replace them
# (severity drives alerts/alertmanager.yml's routing; job and instance say where it fired).
RESERVED_ALERT_LABELS = frozenset({"alertname", "severity", "job", "instance"})
_GRAFANA_UID = re.compile(r"^[A-Za-z0-9_-]*$")
GRAFANA_UID_MAX = 40  # Grafana refuses longer dashboard, folder and datasource uids


def _label_name(name: str) -> str:
    if not _LABEL_NAME.match(name) or name.startswith("__"):
        raise ValueError(f"{name!r} is not a label name Prometheus allows here")
    return name


def _alert_labels(labels: dict[str, str]) -> dict[str, str]:
    for name in labels:
        if not _LABEL_NAME.match(name) or name.startswith("__"):
            raise ValueError(f"{name!r} is not a label name Prometheus allows on an alert")
        if name in RESERVED_ALERT_LABELS:
            raise ValueError(f"{name!r} is set by the rules themselves; pick another label name")
    return labels


def _grafana_uid(text: str) -> str:
    if not _GRAFANA_UID.match(text) or len(text) > GRAFANA_UID_MAX:
        raise ValueError(f"a Grafana uid is at most {GRAFANA_UID_MAX} of A-Z a-z 0-9 - _, got {text!r}")
    return text


# A duration as Prometheus spells it ("5m", "1d"), kept as written: rule names carry it.
Duration = Annotated[str, AfterValidator(_duration)]
Ratio = Annotated[float, AfterValidator(_ratio)]
# Numbers stay as YAML gave them (int or float): `number()` prints 300, not 300.0, either way.
Number = StrictInt | StrictFloat
Positive = Annotated[StrictInt | StrictFloat, AfterValidator(_positive)]
AlertLabels = Annotated[dict[str, StrictStr], AfterValidator(_alert_labels)]
GrafanaUid = Annotated[StrictStr, AfterValidator(_grafana_uid)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class TargetSpec(_Section):
    down_for: Duration
    collector_failing_window: Duration
    collector_failing_share: Ratio
    collector_failing_for: Duration


class PageLifeExpectancySpec(_Section):
    floor_seconds: Positive
    seconds_per_buffer_pool_bytes: Positive
    buffer_pool_bytes_per_step: Positive
    page_bytes: Positive
    for_: Duration = Field(alias="for")


class UpperLimit(_Section):
    """A rate or count that must stay at or under `max`; paged after `for` (dashboards only without)."""

    max: Number
    for_: Duration | None = Field(default=None, alias="for")


class LookupsPerBatchSpec(_Section):
    max: Number
    for_: Duration = Field(alias="for")
    min_batch_requests_per_second: Number


class LowerLimit(_Section):
    min: Number
    for_: Duration = Field(alias="for")


class HitRatioSpec(_Section):
    oltp: Ratio
    olap: Ratio
    for_: Duration = Field(alias="for")


class ForOnly(_Section):
    for_: Duration = Field(alias="for")


class TargetPulledDownSpec(_Section):
    share: Ratio
    lookback: Duration
    for_: Duration = Field(alias="for")


class WindowOnly(_Section):
    window: Duration


class GrantWaitsSpec(_Section):
    max_waiting_queries: Positive
    for_: Duration = Field(alias="for")


class MaxServerMemoryDefaultSpec(_Section):
    default_bytes: Positive
    other_processes_share: Ratio
    for_: Duration = Field(alias="for")


class MemoryHealthSpec(_Section):
    """SQL Server 2025's memory health view (alerts/memory_health.py)."""

    high_for: Duration
    degraded_window: Duration
    degraded_share: Ratio
    degraded_for: Duration


class MemorySpec(_Section):
    page_life_expectancy: PageLifeExpectancySpec
    free_list_stalls_per_second: UpperLimit
    lazy_writes_per_second: UpperLimit
    page_lookups_per_batch_request: LookupsPerBatchSpec
    page_io_per_second: UpperLimit
    free_memory_bytes: LowerLimit
    buffer_cache_hit_ratio: HitRatioSpec
    memory_grants_pending: UpperLimit
    memory_pressure: ForOnly
    external_pressure: ForOnly
    internal_total_at_target_share: Ratio
    target_pulled_down: TargetPulledDownSpec
    grant_timeouts: WindowOnly
    grant_waits: GrantWaitsSpec
    max_server_memory_default: MaxServerMemoryDefaultSpec
    health: MemoryHealthSpec


class CoverageTier(_Section):
    reach: Duration
    step: Duration


class EnduranceSpec(_Section):
    projection_rate_window: Duration
    short_rate_window: Duration
    projection_min_coverage_seconds: Positive
    alert_min_coverage_seconds: Positive
    coverage_tiers: tuple[CoverageTier, ...] = Field(min_length=1)
    budget_high_share: Positive
    exhaustion_share: Positive
    for_: Duration = Field(alias="for")
    keep_firing_for: Duration
    remaining_warning_seconds: Positive
    remaining_critical_seconds: Positive
    remaining_for: Duration


class TempdbSpec(_Section):
    short_rate_window: Duration
    long_rate_window: Duration
    memory_change_target_share: Ratio
    headroom_warning_share: Ratio
    headroom_critical_share: Ratio
    headroom_for: Duration
    projection_window: Duration
    projection_horizon_seconds: Positive
    projected_full_for: Duration
    version_store_window: Duration
    version_store_min_bytes: Positive
    version_store_for: Duration
    advised_max_data_files: Positive
    layout_for: Duration
    # SQL Server 2025 tempdb space resource governance, per workload group (alerts/tempdb_governance.py).
    workload_group_violations_window: Duration
    workload_group_near_limit_share: Ratio
    workload_group_near_limit_for: Duration


class IoLatencySpec(_Section):
    log_write_max_seconds: Positive
    data_read_max_seconds: Positive
    min_operations_per_second: Positive
    for_: Duration = Field(alias="for")


class DrivesSpec(_Section):
    life_used_warning: Positive
    wear_for: Duration
    critical_for: Duration
    reading_stale_seconds: Positive
    unread_for: Duration
    implied_min_life_used: Ratio
    disagreement_factor: Positive
    disagreement_for: Duration


class AvailabilityGroupsSpec(_Section):
    """Always On availability groups (alerts/availability_groups.py)."""

    unhealthy_for: Duration
    queue_window: Duration
    redo_queue_min_bytes: Positive
    send_queue_min_bytes: Positive
    queue_for: Duration
    # Paging alerts that only warn while the target is a secondary replica of an availability group (it
    # serves no writes; the primary's alerts page). Every other paging alert pages on any replica.
    secondary_warns_only: tuple[StrictStr, ...]


# Prometheus answers an instant query with a series' latest sample up to 5 minutes old (its lookback
# delta): a recorded series evaluated less often than that drops out of every query between evaluations.
# A minute to spare for a late evaluation on a loaded server.
RULE_GROUP_INTERVAL_MAX_SECONDS = 240


def _rule_group_interval(text: str) -> str:
    if duration_seconds(text) > RULE_GROUP_INTERVAL_MAX_SECONDS:
        raise ValueError(
            f"at most {RULE_GROUP_INTERVAL_MAX_SECONDS // 60}m, got {text!r}: a recorded series evaluated"
            " less often than Prometheus's five-minute lookback drops out of the queries and alerts that"
            " read it"
        )
    return text


Evaluator = Literal["prometheus", "thanos_ruler"]  # group_names.EVALUATORS


def _evaluators(evaluators: dict[str, Evaluator]) -> dict[str, Evaluator]:
    unknown = sorted(set(evaluators) - set(group_names.ALL))
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)}: not a rule group of the bundle (its groups: {', '.join(group_names.ALL)})"
        )
    missing = [name for name in group_names.ALL if name not in evaluators]
    if missing:
        raise ValueError(f"no evaluator for {', '.join(missing)}")
    if evaluators[group_names.THANOS_RULER_WATCH] != group_names.PROMETHEUS:
        raise ValueError(
            f"{group_names.THANOS_RULER_WATCH}: must be evaluated by prometheus (a shard scraping the ruler):"
            " the ruler cannot page about its own failing evaluations"
        )
    return evaluators


class RuleGroupsSpec(_Section):
    """Recording rules reading a window of `long_window` or more (and the rules built on them) go to a
    group of their own evaluated every `long_window_interval`; the rest at the global interval.
    `evaluators` says where each group runs: each shard's Prometheus or Thanos Ruler (deploy/mixin.py
    writes the two kinds to separate files and PrometheusRules)."""

    long_window: Duration
    long_window_interval: Annotated[Duration, AfterValidator(_rule_group_interval)]
    evaluators: Annotated[dict[str, Evaluator], AfterValidator(_evaluators)]

    def evaluator(self, group: str) -> Evaluator:
        return self.evaluators[group]


class FleetSpec(_Section):
    """The fleet group (alerts/fleet.py): counts and sums across every shard."""

    # The external label each shard's Prometheus carries (docs/scaling.md): the per-shard counts keep it.
    shard_label: Annotated[StrictStr, AfterValidator(_label_name)]
    interval: Duration  # how often the evaluator (Thanos Ruler) evaluates the group
    # The watch on the ruler (alerts/thanos_ruler.py): the Prometheus job scraping the ruler's /metrics,
    # the share of the group's rule evaluations failing over `failing_window` that counts as failing, and
    # how long before each alert fires.
    ruler_selector: StrictStr
    failing_window: Duration
    failing_share: Ratio
    failing_for: Duration
    ruler_down_for: Duration


class ShippedCollectorsSpec(_Section):
    """The opt-in alerts on the shipped collector files (alerts/shipped_collectors.py): how long a failed
    Agent job, a long run, an old backup or a blocked wait may last before each warns."""

    agent_job_failed_for: Duration
    agent_job_max_run: Duration
    agent_job_long_run_for: Duration
    backup_full_max_age: Duration
    backup_log_max_age: Duration
    backup_for: Duration
    # Databases the backup alerts leave alone (a PromQL regex on the database_name label; empty: none).
    backup_exclude_databases: StrictStr
    blocked_wait_max: Duration
    blocked_wait_for: Duration


class GrafanaSpec(_Section):
    """Where the dashboards go in a site's Grafana. An empty datasource_uid keeps the dashboards' own
    Data source variable; a uid pins every query to that datasource."""

    datasource_uid: GrafanaUid
    uid_prefix: GrafanaUid
    folder: StrictStr = Field(min_length=1)


class Spec(_Section):
    """alerts/thresholds.yml. `for_override`/`window_override` (tests that cannot wait minutes) replace
    every `for:` and every rate window the generators ask for through `duration()` and `window()`; the
    fields themselves, and so every rule name, keep the spec's values."""

    selector: str
    exporter_selector: str
    smartctl_exporter_selector: str
    runbook_base_url: str
    rate_window: Duration
    keep_firing_for: Duration
    target: TargetSpec
    memory: MemorySpec
    endurance: EnduranceSpec
    tempdb: TempdbSpec
    io_latency: IoLatencySpec
    drives: DrivesSpec
    availability_groups: AvailabilityGroupsSpec
    alert_labels: AlertLabels
    rule_groups: RuleGroupsSpec
    fleet: FleetSpec
    shipped_collectors: ShippedCollectorsSpec
    grafana: GrafanaSpec

    _for_override: str | None = PrivateAttr(default=None)
    _window_override: str | None = PrivateAttr(default=None)

    @classmethod
    def parse(cls, raw: Any, source: str = SPEC_PATH.name) -> Spec:
        """The spec from its YAML mapping, or a SpecError naming every bad key by its dotted path."""
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise SpecError(f"{source}: " + "; ".join(_problems(exc))) from None

    def with_overrides(self, for_override: str | None = None, window_override: str | None = None) -> Spec:
        for override in (for_override, window_override):
            if override is not None:
                duration_seconds(override)
        copy = self.model_copy()
        copy._for_override = for_override
        copy._window_override = window_override
        return copy

    @property
    def raw(self) -> dict[str, Any]:
        """The spec as YAML spells it (`for`, not `for_`): what tests perturb and parse again."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @property
    def window_override(self) -> str | None:
        return self._window_override

    def duration(self, value: str) -> str:
        """A `for:` duration from the spec, or the override when one is set."""
        return self._for_override or value

    def window(self, value: str) -> str:
        """A rate window from the spec, or the override when one is set."""
        return self._window_override or value

    def runbook(self, alert: str) -> str:
        return f"{self.runbook_base_url.rstrip('/')}/{alert}.md"


# What each pydantic error type expected, in the words of a YAML file's author.
_EXPECTED = {
    "string_type": "a string",
    "int_type": "a number",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "tuple_type": "a list",
    "list_type": "a list",
}


def _problems(exc: ValidationError) -> list[str]:
    """One line per bad key, by its dotted path as the YAML spells it. A number that may be an int or a
    float fails both branches of the union; the branch names (`int`, `float`) are not keys, so they are
    dropped and the two failures read as one "expected a number"."""
    by_path: dict[str, list[str]] = {}
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        while loc and (loc[-1] in ("int", "float", "str") or loc[-1].startswith("function-")):
            loc.pop()
        path = ".".join(loc) or "(top)"
        kind = error["type"]
        if kind in _EXPECTED:
            text = f"expected {_EXPECTED[kind]}, got {_shown(error.get('input'))}"
        elif kind == "extra_forbidden":
            text = "unknown key (misspelt, or not a setting of this file)"
        elif kind == "missing":
            text = "missing"
        else:
            text = error["msg"].removeprefix("Value error, ")
        if text not in by_path.setdefault(path, []):
            by_path[path].append(text)
    return [f"{path}: {' or '.join(texts)}" for path, texts in by_path.items()]


def _shown(value: Any) -> str:
    kind = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "nothing"}
    name = kind.get(type(value), type(value).__name__)
    if isinstance(value, dict | list):
        return name
    text = repr(value)
    return f"{name} {text if len(text) <= 60 else text[:57] + '...'}"


def merged(base: Any, overrides: Any) -> Any:
    """A site's partial file over the spec: mappings merge key by key, all the way down; anything else in
    the overrides (a number, a string, a list, null) replaces the value it stands for. Lists are replaced
    whole (endurance.coverage_tiers is the only one): merged by position, a list of three over one of four
    would keep a stale fourth tier nobody wrote. Unknown keys are kept, so the spec refuses them by name."""
    if isinstance(base, dict) and isinstance(overrides, dict):
        out = dict(base)
        for key, value in overrides.items():
            out[key] = merged(base[key], value) if key in base else value
        return out
    return overrides


class _UniqueKeyLoader(yaml.SafeLoader):
    """A key given twice in one mapping is refused: YAML would keep the second silently, and a second
    `memory:` in a site file would drop every setting written under the first."""


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise _DuplicateKey(None, None, f"{key!r} is given twice in one mapping", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def load_site(overrides: Path | None, base: Path = SPEC_PATH) -> Spec:
    """The shipped spec with a site's partial file merged over it (`make mixin`, docs/mixin.md), checked
    by the same models as the spec itself. None or an empty file: the shipped spec unchanged."""
    if overrides is None:
        return load(base)
    try:
        text = overrides.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{overrides}: cannot read it ({exc.strerror})") from None
    try:
        site = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        where = f", line {exc.problem_mark.line + 1}" if exc.problem_mark else ""
        kind = "" if isinstance(exc, _DuplicateKey) else "not YAML: "
        raise SpecError(f"{overrides}{where}: {kind}{exc.problem}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{overrides}: not YAML: {exc}") from None
    if site is None:
        site = {}
    if not isinstance(site, dict):
        raise SpecError(f"{overrides}: expected a mapping of settings, got {_shown(site)}")
    raw = yaml.safe_load(base.read_text(encoding="utf-8"))
    return Spec.parse(merged(raw, site), f"{overrides} (over {base.name})")


def load(path: Path = SPEC_PATH, for_override: str | None = None, window_override: str | None = None) -> Spec:
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: expected a mapping")
    return Spec.parse(raw, path.name).with_overrides(for_override, window_override)
