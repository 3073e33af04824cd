"""The SSD pools' endurance rules: the write rates over the span of data Prometheus holds (the coverage
expression, so a young Prometheus does not understate them), the projection of the rated endurance a pool
uses over its planned life, the bytes written since it entered service and the time left, and the alerts
on them. alerts/generate.py puts them in the recording and alert groups; the drives' own figures are in
drives.py.
"""

from __future__ import annotations

from typing import Any

from mssql_memory_exporter.collectors import endurance

from . import names as N
from .names import COUNTED, COVERAGE_SUFFIX, REMAINING, SHARE, SINCE_IN_SERVICE, UNOBSERVED, RuleNames
from .rule_parts import INSTANCE
from .rule_parts import alert as _alert
from .rule_parts import life_left as _life_left
from .rule_parts import metric as _m
from .spec import Spec, duration_seconds, number, prometheus_duration

# Set only inside the coverage expression, to tell its tiers apart; never on a recorded series.
TIER_LABEL = "coverage_tier"


def first_sample_timestamp(spec: Spec, series: str, window: str) -> str:
    # The spec's endurance.coverage_tiers: fine subquery steps close to now, coarse ones further back. A
    # step finds a sample only at or after the first one, so each tier errs late by at most its step.
    seconds = duration_seconds(window)
    tiers: list[str] = []
    for tier in spec.endurance.coverage_tiers:
        reach, step = tier.reach, tier.step
        last = duration_seconds(reach) >= seconds
        if duration_seconds(step) * 10 > seconds:  # the end-to-end tests' short windows
            step = f"{max(1, int(seconds // 60))}s"
        # One step more than the reach: Prometheus 3 reads the range as left-open, so a range of exactly the
        # reach drops the step on its start, and a day of data measured 85,800 s instead of 86,400 s (the
        # rate then read 0.7 % high). The step beyond is harmless: coverage() caps the span at the window.
        span = prometheus_duration(duration_seconds(window if last else reach) + duration_seconds(step))
        found = f"min_over_time(timestamp({series})[{span}:{step}])"
        tiers.append(f'label_replace({found}, "{TIER_LABEL}", "{len(tiers)}", "", "")')
        if last:
            break
    # Each tier's result is the timestamp of a real sample, so the earliest of them is the best estimate. A
    # coarse tier has no step on a series younger than its step yet (the hourly one for up to an hour): the
    # tier label keeps every tier's answer apart through `or`, and min drops the tiers that have none.
    # (Chained `A <= B or B` lost the whole coverage while any coarser tier was still empty.)
    joined = "\n  or ".join(tiers)
    return f"min without ({TIER_LABEL}) (\n  {joined}\n)"


def coverage(spec: Spec, series: str, window: str) -> str:
    """Seconds of data `series` has in Prometheus within the last `window`: from its first sample there
    to its latest, capped at the window. A young Prometheus (or a new target) has less than the window.
    The latest sample, not now: increase() stops extrapolating half an interval after it, so during a
    scrape gap a span up to now would make the rate read low."""
    return (
        f"clamp_max(\n  timestamp({series})\n  - {first_sample_timestamp(spec, series, window)},\n"
        f"  {number(duration_seconds(window))}\n)"
    )


def recording_rules(spec: Spec) -> list[dict[str, Any]]:
    written = _m(spec, endurance.WRITTEN.name)
    in_service = _m(spec, endurance.IN_SERVICE.name)
    known_at = _m(spec, endurance.KNOWN_WRITTEN_AT.name)
    pool = f"{INSTANCE}, pool"
    names = RuleNames.from_spec(spec)
    long_name, short_name = names.pool_long, names.pool_short
    long_rate = names.pool(long_name)
    counted, unobserved = COUNTED, UNOBSERVED
    # Where the bytes written so far stop being known: the drives' own reading, or the in-service date
    # without one (the exporter's config keeps the reading on or after that date; the filter takes the
    # later of the two anyway).
    anchor = f"(\n      {known_at}\n      >= on ({pool}) {in_service}\n    )\n    or on ({pool}) {in_service}"
    long_window, short_window = (
        spec.window(spec.endurance.projection_rate_window),
        spec.window(spec.endurance.short_rate_window),
    )
    if duration_seconds(short_window) > duration_seconds(long_window):
        raise ValueError("endurance.short_rate_window must not be longer than projection_rate_window")
    rates: list[dict[str, Any]] = [
        {"record": long_rate + COVERAGE_SUFFIX, "expr": coverage(spec, written, long_window)},
        {
            # The short window's span is the long one's, capped: one subquery per series, not two.
            "record": names.pool(short_name) + COVERAGE_SUFFIX,
            "expr": f"clamp_max({long_rate}{COVERAGE_SUFFIX}, {number(duration_seconds(short_window))})",
        },
    ]
    for name, window in ((short_name, short_window), (long_name, long_window)):
        rate = names.pool(name)
        rates += [
            {
                # increase() over the window / the span of it Prometheus holds: rate() would divide a
                # young series' few minutes of writes by the whole window and understate it 100-fold.
                # The span runs from the first sample found (at most one subquery step late) to the
                # latest, and increase() extrapolates up to half a scrape interval beyond both ends: all
                # of it errs high (by under 1% after an hour of 15 s scrapes), never low.
                "record": rate,
                "expr": f"increase({written}[{window}])\n/ ({rate}{COVERAGE_SUFFIX} > 0)",
            },
        ]
    return [
        *rates,
        {
            # write rate x planned lifetime / rated endurance: the Micron brief's projection, in bytes.
            "record": SHARE,
            "expr": (
                f"{long_rate}\n"
                f"* on ({pool}) group_left () {_m(spec, endurance.PLANNED_LIFETIME.name)}\n"
                f"/ on ({pool}) group_left () {_m(spec, endurance.RATED_ENDURANCE.name)}"
            ),
        },
        {
            # The counter holds the bytes since its counting start and nothing older: its current value,
            # not an increase() over a window, so neither retention nor counter resets matter. An exporter
            # restart moves the counting start together with the counter's return to 0.
            "record": counted,
            "expr": (
                f"{written}\n- on ({pool}, source) group_left ()"
                f" {_m(spec, endurance.COUNTING_START_WRITTEN.name)}"
            ),
        },
        {
            # Nothing counted the bytes between the anchor and the counting start: the 7-day rate fills
            # that gap (and a previous exporter process's count, which the counter no longer holds).
            "record": unobserved,
            "expr": (
                f"{long_rate}\n* on ({pool}, source) group_left () clamp_min(\n"
                f"  {_m(spec, endurance.COUNTING_START.name)}\n"
                f"  - on ({pool}) group_left () (\n    {anchor}\n  ),\n  0\n)"
            ),
        },
        {
            # Known (the drives' reading, 0 without one) + unobserved (extrapolated) + counted.
            "record": SINCE_IN_SERVICE,
            "expr": (
                f"{counted}\n+ on ({pool}, source) group_left () {unobserved}\n"
                f"+ on ({pool}) group_left () (\n"
                f"  {_m(spec, endurance.KNOWN_WRITTEN.name)}\n"
                f"  or on ({pool}) 0 * {in_service}\n)"
            ),
        },
        {
            "record": REMAINING,
            "expr": (
                # Both joins keep the left side's labels (the target's own, env included): a one-to-one
                # `on (...)` keeps only the `on` labels, and the next join then matches nothing.
                f"clamp_min(\n  (\n    {_m(spec, endurance.RATED_ENDURANCE.name)}\n"
                f"    - on ({pool}) group_right () {SINCE_IN_SERVICE}\n"
                f"  )\n  / on ({pool}, source) group_left () {long_rate},\n  0\n)"
            ),
        },
    ]


def _retirement_of_pool() -> str:
    # The alert fires for pools that wear out before their planned retirement and for pools kept past it;
    # the text says which, from the pool's own gauges at notification time.
    pool = "{job='%s',instance='%s',pool='%s'}"
    left = f"{endurance.IN_SERVICE.name}{pool} + {endurance.PLANNED_LIFETIME.name}{pool} - time()"
    labels = " $labels.job $labels.instance $labels.pool" * 2
    return (
        f'{{{{ with printf "{left}"{labels} | query }}}}{{{{ $left := . | first | value }}}}'
        "{{ if gt $left 0.0 }}, before it is due to be retired in {{ $left | humanizeDuration }}"
        "{{ else }}; it is in service past its planned life{{ end }}{{ end }}"
    )


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    share, remaining = SHARE, REMAINING
    window = spec.endurance.projection_rate_window
    pool = f"{INSTANCE}, pool"
    # A projection from a few hours of data is shown on the dashboards but never pages: a bursty first
    # hour of a new install would otherwise read as a pool worn out in days.
    min_coverage = spec.endurance.alert_min_coverage_seconds
    if spec.window_override is not None:
        # The end-to-end tests' windows are seconds long, and the coverage never exceeds the window.
        min_coverage = min(min_coverage, duration_seconds(spec.window_override) / 2)
    enough_data = (
        f"\nand on ({pool}, source)\n"
        f"  {RuleNames.from_spec(spec).pool(window)}{COVERAGE_SUFFIX} >= {number(min_coverage)}"
    )
    # Seconds until the end of the pool's planned life: wearing out after that is no concern.
    life_left = _life_left(lambda name: _m(spec, name))
    rules = [
        _alert(
            spec,
            N.ENDURANCE_EXHAUSTION,
            f"{share} > {number(spec.endurance.exhaustion_share)}{enough_data}",
            spec.endurance.for_,
            "warning",
            "SSD pool {{ $labels.pool }} wears out before its planned life ends",
            f"At the {window} write rate ({{{{ $labels.source }}}} source),"
            " pool {{ $labels.pool }} would write"
            " {{ $value | humanizePercentage }} of its rated endurance over its planned life (limit: "
            + f"{number(spec.endurance.exhaustion_share * 100)}%).",
            keep_firing=spec.endurance.keep_firing_for,
        ),
        _alert(
            spec,
            N.ENDURANCE_BUDGET,
            f"{share} > {number(spec.endurance.budget_high_share)}{enough_data}",
            spec.endurance.for_,
            "warning",
            "SSD pool {{ $labels.pool }} uses most of its endurance budget",
            f"At the {window} write rate ({{{{ $labels.source }}}} source),"
            " pool {{ $labels.pool }} would write"
            " {{ $value | humanizePercentage }} of its rated endurance over its planned life (budget: "
            + f"{number(spec.endurance.budget_high_share * 100)}%).",
            keep_firing=spec.endurance.keep_firing_for,
        ),
    ]
    limits = {
        "warning": spec.endurance.remaining_warning_seconds,
        "critical": spec.endurance.remaining_critical_seconds,
    }
    for severity, limit in limits.items():
        rules.append(
            _alert(
                spec,
                N.ENDURANCE_REMAINING,
                # Silent only while the planned retirement is still ahead AND comes first; a pool kept in
                # service past its planned life is alerted like any other.
                f"{remaining} < {number(limit)}\nunless on ({pool}, source) (\n"
                f"  {remaining} > on ({pool}) group_left () {life_left}\n"
                f"  and on ({pool}) {life_left} > 0\n){enough_data}",
                spec.endurance.remaining_for,
                severity,
                "SSD pool {{ $labels.pool }} runs out of rated endurance soon",
                f"At the {window} write rate ({{{{ $labels.source }}}} source),"
                " pool {{ $labels.pool }} reaches"
                " its rated bytes written in {{ $value | humanizeDuration }}"
                + _retirement_of_pool()
                + f" (limit: {number(limit / 86400)} days).",
                keep_firing=spec.endurance.keep_firing_for,
            )
        )
    return rules
