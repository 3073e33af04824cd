"""The memory dashboard's availability-group row: recovery objectives in time (Microsoft's RPO and RTO
estimates) against the spec's objectives, and the data movement state of each copy.

The estimated data loss is the primary's view (a partner nobody scrapes shows here too, under its
`replica`); the redo time is each secondary's own. A target in no availability group shows the no-data
text naming the collectors."""

from __future__ import annotations

from mssql_memory_exporter.collectors import availability_groups, availability_recovery

from alerts.names import AG_DATA_LOSS, AG_RECOVERY_TIME, AG_REDO_STUCK, AG_SEND_QUEUE_GROWING
from alerts.spec import duration_seconds, number

from .empty import off
from .grafana import GREEN, ORANGE, RED, Panel, Query, Row, Thresholds, value_map
from .limits import Limits
from .queries import m

NOT_IN_A_GROUP = "In no availability group"


def memory_row_availability(lim: Limits) -> list[Panel | Row]:
    ag = lim.spec.availability_groups
    overhead = number(duration_seconds(ag.failover_overhead))
    queue = m(availability_groups.REDO_QUEUE_BYTES.name)
    rate = m(availability_groups.REDO_RATE.name)
    return [
        Row("Availability groups: recovery objectives"),
        Panel(
            "timeseries",
            "Estimated data loss per partner copy (RPO, primary's view)",
            "On the primary: how much committed work each partner replica's copy would lose at a failover "
            "now, Microsoft's estimate (the primary's last commit time minus the last one hardened on that "
            "copy; 0 while it is failover ready). A replica no exporter scrapes (a DR site) shows here too. "
            f"Healthy: under the recovery point objective, {number(ag.rpo_seconds)} s "
            f"(availability_groups.rpo_seconds; over it for {ag.objective_for} pages).",
            "s",
            [
                Query(
                    m(availability_recovery.PARTNER_DATA_LOSS.name),
                    "{{replica}} {{database}} ({{availability_group}})",
                )
            ],
            thresholds=Thresholds.healthy_below(ag.rpo_seconds),
            min=0,
            links=[lim.runbook(AG_DATA_LOSS)],
            no_value=off(
                availability_recovery, also=f"{NOT_IN_A_GROUP}, not the primary, or no partner replica"
            ),
        ),
        Panel(
            "timeseries",
            "Estimated failover time per secondary copy (RTO)",
            "On a secondary: the time a failover to it would keep each database offline, Microsoft's "
            f"estimate: redo queue / redo rate + {overhead} s of failover overhead. Healthy: under the "
            f"recovery time objective, {number(ag.rto_seconds)} s (availability_groups.rto_seconds)."
            " A redo rate of 0 with a queue is a stopped redo, not a long one: the stopped-redo alert covers"
            " it, and the line breaks there.",
            "s",
            [
                Query(
                    f"{queue} / ({rate} > 0) + {overhead}",
                    "{{database}} ({{availability_group}})",
                )
            ],
            thresholds=Thresholds.healthy_below(ag.rto_seconds),
            min=0,
            links=[lim.runbook(AG_RECOVERY_TIME), lim.runbook(AG_REDO_STUCK)],
            no_value=off(availability_groups, also=f"{NOT_IN_A_GROUP}, or a primary (nothing to redo)"),
        ),
        Panel(
            "stat",
            "Data movement per copy",
            "Each copy of a database on this target: its data movement state. Healthy: SYNCHRONIZED on a "
            "synchronous-commit replica, SYNCHRONIZING on an asynchronous one (it never reports "
            "SYNCHRONIZED); NOT SYNCHRONIZING means no log moves to or from it.",
            "none",
            [
                Query(
                    m(availability_recovery.DATABASE_SYNC_STATE.name),
                    "{{database}} ({{availability_group}})",
                    instant=True,
                )
            ],
            mappings=value_map(
                {
                    0: ("NOT SYNCHRONIZING", RED),
                    1: ("SYNCHRONIZING", ORANGE),
                    2: ("SYNCHRONIZED", GREEN),
                    3: ("REVERTING", ORANGE),
                    4: ("INITIALIZING", ORANGE),
                }
            ),
            options={"textMode": "value_and_name", "colorMode": "background"},
            links=[lim.runbook(AG_SEND_QUEUE_GROWING)],
            no_value=off(availability_recovery, also=NOT_IN_A_GROUP),
        ),
        Panel(
            "stat",
            "Suspended copies",
            "Copies of a database on this target whose data movement is suspended, with the reason SQL "
            "Server gives (suspend_from_user: someone ran SET HADR SUSPEND; suspend_from_redo and the "
            "others: SQL Server stopped it after an error). While suspended the primary's log cannot be "
            "truncated past it and a failover to it loses what it has not received. Healthy: none.",
            "none",
            [
                Query(
                    m(availability_recovery.DATABASE_SUSPENDED.name) + " == 1",
                    "{{database}} ({{availability_group}}): {{reason}}",
                    instant=True,
                )
            ],
            mappings=value_map({1: ("SUSPENDED", RED)}),
            options={"textMode": "value_and_name", "colorMode": "background"},
            links=[lim.runbook(AG_REDO_STUCK), lim.runbook(AG_DATA_LOSS)],
            no_value=off(availability_recovery, also="None suspended, " + NOT_IN_A_GROUP.lower()),
        ),
    ]
