"""Rules for Always On availability groups, and paging that follows the primary.

Every replica is a target of its own and exports only its own rows (the exporter's availability_groups
collector), so a queue is never counted twice and each alert names the replica that holds the problem.
`mssql_ag_replica_is_primary` (0/1 per availability group) is what the other rules join on to tell a
secondary from a primary. Thresholds: alerts/thresholds.yml `availability_groups.*`.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

from mssql_memory_exporter.collectors import availability_groups as ag_collector
from mssql_memory_exporter.collectors import availability_recovery as recovery

from . import names as N
from .rule_parts import INSTANCE, alert, metric
from .spec import Spec, SpecError, duration_seconds, number

IS_PRIMARY = ag_collector.REPLICA_IS_PRIMARY.name


def secondary(spec: Spec) -> str:
    """Series of a target while it is a secondary replica and the primary of none of its groups (a target
    that is the primary of one group and a secondary of another serves writes: it still pages). A target
    whose role in any group is RESOLVING or unknown (`mssql_ag_replica_info{role!="secondary"}`, NULL role
    or a group it is being removed from) is no secondary either: a replica nobody can place keeps paging
    rather than being quietly demoted to a warning."""
    role = metric(spec, IS_PRIMARY)
    not_secondary = metric(spec, ag_collector.REPLICA_INFO.name, 'role!="secondary"')
    return f"{role} == 0\n  unless on ({INSTANCE}) ({role} == 1 or {not_secondary})"


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    m = partial(metric, spec)
    ag = spec.availability_groups
    window = spec.window(ag.queue_window)

    def growing(series: str, floor: float) -> str:
        return f"{series} > {number(floor)}\nand deriv({series}[{window}]) > 0"

    return [
        alert(
            spec,
            N.AG_REPLICA_UNHEALTHY,
            f"{m(ag_collector.REPLICA_HEALTH.name)} < 2\nor {m(ag_collector.REPLICA_CONNECTED.name)} == 0",
            ag.unhealthy_for,
            "critical",
            "Availability group {{ $labels.availability_group }}: replica {{ $labels.replica }} not healthy",
            "Replica {{ $labels.replica }} (target {{ $labels.instance }}) reports synchronization health"
            " or connection {{ $value }} (health 2 = healthy, connected 1) for "
            + spec.duration(ag.unhealthy_for)
            + ": at least one of its databases is not synchronizing, so a failover to or from it may lose"
            " data or not be possible.",
        ),
        alert(
            spec,
            N.AG_REDO_QUEUE_GROWING,
            growing(m(ag_collector.REDO_QUEUE_BYTES.name), ag.redo_queue_min_bytes),
            ag.queue_for,
            "warning",
            "Redo falling behind for {{ $labels.database }} on {{ $labels.instance }}",
            "The secondary copy of {{ $labels.database }} ({{ $labels.availability_group }}) has"
            " {{ $value | humanize1024 }}B of hardened log still to redo, and the queue has grown over the"
            f" last {ag.queue_window} (floor {number(ag.redo_queue_min_bytes / 2**20)} MiB): a failover"
            " to it would take that long to come online, and readable secondaries serve stale data.",
        ),
        *send_queue_rules(spec),
        *recovery_rules(spec),
    ]


def synchronous(spec: Spec) -> str:
    """This target's replica of the group in synchronous-commit mode (availability_recovery)."""
    return f"{metric(spec, recovery.REPLICA_SYNCHRONOUS.name)} == 1"


def send_queue_rules(spec: Spec) -> list[dict[str, Any]]:
    """One alert name, two rules (told apart by a `commit` label) that never both hold for a series: an
    asynchronous replica's queue is the data a forced failover would lose and is normal under load, so it
    must also be growing; a synchronous replica's queue means it is not synchronized (commits wait, a
    failover to it is not ready), so its size alone is enough. A replica whose mode is unknown (no VIEW
    ANY DEFINITION, or an exporter without availability_recovery) is treated as asynchronous, the old
    rule."""
    ag = spec.availability_groups
    send = metric(spec, ag_collector.LOG_SEND_QUEUE_BYTES.name)
    on_group = f"on ({INSTANCE}, availability_group)"
    floor = number(ag.send_queue_min_bytes / 2**20)
    window = spec.window(ag.queue_window)
    summary = "Log send queue growing for {{ $labels.database }} on {{ $labels.instance }}"
    head = "{{ $value | humanize1024 }}B of {{ $labels.database }}'s log ({{ $labels.availability_group }})"
    return [
        alert(
            spec,
            N.AG_SEND_QUEUE_GROWING,
            f"(\n  {send} > {number(ag.send_queue_min_bytes)}\n  and deriv({send}[{window}]) > 0\n)"
            f"\nunless {on_group} {synchronous(spec)}",
            ag.queue_for,
            "warning",
            summary,
            head + f" has not reached this asynchronous secondary and the queue has grown over the last"
            f" {ag.queue_window} (floor {floor} MiB): what a forced failover now would lose. The network"
            " or the secondary's log writes cannot keep up with the primary.",
            labels={"commit": "asynchronous"},  # or unknown: the old rule
        ),
        alert(
            spec,
            N.AG_SEND_QUEUE_GROWING,
            f"{send} > {number(ag.send_queue_min_bytes)}\nand {on_group} {synchronous(spec)}",
            ag.queue_for,
            "warning",
            summary.replace("growing", "held"),
            head + f" has not reached this synchronous-commit secondary for {spec.duration(ag.queue_for)}"
            f" (floor {floor} MiB): it is not synchronized, so a failover to it would lose that log, and"
            " commits on the primary wait on it until it drops out of synchronous commit.",
            labels={"commit": "synchronous"},
        ),
    ]


def recovery_rules(spec: Spec) -> list[dict[str, Any]]:
    """Recovery objectives, in time (Microsoft's RPO and RTO estimates), and a redo that has stopped."""
    ag = spec.availability_groups
    m = partial(metric, spec)
    queue, rate = m(ag_collector.REDO_QUEUE_BYTES.name), m(ag_collector.REDO_RATE.name)
    overhead = number(duration_seconds(ag.failover_overhead))
    return [
        alert(
            spec,
            N.AG_DATA_LOSS,
            f"{m(recovery.PARTNER_DATA_LOSS.name)} > {number(ag.rpo_seconds)}",
            ag.objective_for,
            "critical",
            "{{ $labels.replica }}'s copy of {{ $labels.database }} would lose"
            " {{ $value | humanizeDuration }}",
            "The primary {{ $labels.instance }} has committed {{ $value | humanizeDuration }} of"
            " {{ $labels.database }} ({{ $labels.availability_group }}) that replica {{ $labels.replica }}"
            " has not hardened (Microsoft's estimate: the gap between the two last_commit_time values), above"
            f" the recovery point objective of {number(ag.rpo_seconds)} s for"
            f" {spec.duration(ag.objective_for)}:"
            " a failover to that replica now loses more than the business accepted.",
        ),
        alert(
            spec,
            N.AG_RECOVERY_TIME,
            f"{queue} / ({rate} > 0) + {overhead} > {number(ag.rto_seconds)}",
            ag.objective_for,
            "warning",
            "A failover to {{ $labels.instance }} would take {{ $value | humanizeDuration }} for"
            " {{ $labels.database }}",
            "This secondary's copy of {{ $labels.database }} ({{ $labels.availability_group }}) has more"
            " hardened log to redo than its redo rate clears in the recovery time objective: redo queue /"
            f" redo rate + {overhead} s of failover overhead is {{{{ $value | humanizeDuration }}}}, above"
            f" {number(ag.rto_seconds)} s for {spec.duration(ag.objective_for)} (Microsoft's estimate)."
            " A failover to it would keep the database offline that long.",
        ),
        alert(
            spec,
            N.AG_REDO_STUCK,
            f"{queue} > 0\nand {rate} == 0",
            ag.redo_stuck_for,
            "warning",
            "Redo stopped for {{ $labels.database }} on {{ $labels.instance }}",
            "The secondary copy of {{ $labels.database }} ({{ $labels.availability_group }}) has"
            " {{ $value | humanize1024 }}B of hardened log to redo and has redone none of it for"
            f" {spec.duration(ag.redo_stuck_for)}, whether the queue grows or stays flat: a failover to it"
            " would wait for all of it, and readers of this secondary see data that stopped moving.",
        ),
    ]


# The label of a paging alert's warning twin on a secondary (its value: "secondary").
SECONDARY_LABEL = "ag_role"


def follow_the_primary(spec: Spec, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each paging alert named in `availability_groups.secondary_warns_only` becomes two rules of the same
    name: the paging one unless the target is a secondary, and a warning one while it is. One instance is
    in one role at a time, so an alert never pages and warns at once; after a failover the page moves to
    the new primary and the old one's drops to a warning (a new alert, with its own `for:`)."""
    wanted = set(spec.availability_groups.secondary_warns_only)
    paging = {r["alert"] for r in rules if "alert" in r and r["labels"]["severity"] == "critical"}
    unknown = sorted(wanted - paging)
    if unknown:
        raise SpecError(
            f"availability_groups.secondary_warns_only: {', '.join(unknown)} is not a paging alert"
            f" (paging: {', '.join(sorted(paging))})"
        )
    on_secondary = f"on ({INSTANCE}) (\n  {secondary(spec)}\n)"
    out: list[dict[str, Any]] = []
    for rule in rules:
        if rule.get("alert") not in wanted or rule["labels"]["severity"] != "critical":
            out.append(rule)
            continue
        expr = rule["expr"].rstrip("\n").replace("\n", "\n  ")
        pages = {**rule, "expr": f"(\n  {expr}\n)\nunless {on_secondary}"}
        warns = copy.deepcopy(rule)
        warns["expr"] = f"(\n  {expr}\n)\nand {on_secondary}"
        warns["labels"]["severity"] = "warning"
        # Its own label set: where the alert also has a warning rule of its own (tempdb headroom), both may
        # fire for one secondary, and two rules writing the same ALERTS series would overwrite each other.
        warns["labels"][SECONDARY_LABEL] = "secondary"
        warns["annotations"]["description"] += (
            " Only a warning here: this target is a secondary replica of an availability group"
            " (alerts/thresholds.yml availability_groups.secondary_warns_only)."
        )
        out += [pages, warns]
    return out
