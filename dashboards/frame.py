"""What every dashboard has around its panels: uids, tags, variables, annotations and the links between
the dashboards."""

from __future__ import annotations

from mssql_memory_exporter.collectors import availability_groups, endurance, resource_monitor, sys_info
from mssql_memory_exporter.scrape import scrape_metrics

from .grafana import (
    BLUE,
    ORANGE,
    RED,
    Json,
    dashboard_link,
    datasource_variable,
    external_link,
    override,
    prometheus_annotation,
    query_variable,
)
from .limits import Limits
from .queries import instance, m, site

MEMORY_UID = "mssql-memory-pressure"

ENDURANCE_UID = "mssql-tempdb-ssd-endurance"

FLEET_UID = "mssql-fleet-capacity"

TAGS = ["mssql", "sql-server"]


def site_uid(uid: str) -> str:
    """A dashboard's uid in the site's Grafana: the spec's grafana.uid_prefix before the bundle's own."""
    return site().grafana.uid_prefix + uid


def datasource_pinned() -> bool:
    """A site that names its datasource (grafana.datasource_uid) gets no Data source variable."""
    return bool(site().grafana.datasource_uid)


def variables(
    lim: Limits, multi: bool, extra: list[Json] | None = None, pools_first: bool = False
) -> list[Json]:
    selector = lim.spec.selector
    all_value = ".+" if multi else None
    instance = query_variable(
        "instance",
        "Instance",
        f'label_values({scrape_metrics.UP.name}{{{selector}, job=~"$job"}}, instance)',
        "SQL Server targets, as the scrape job labels them (the exporter's target names).",
        multi=multi,
        all_value=all_value,
    )
    if pools_first:
        # Instances with SSD pools first, so the dashboard opens on one whose SSD half has data: 1 + the
        # number of pool series for those, 0 for the rest, sorted descending; one line for Grafana 9.3.
        instance = query_variable(
            "instance",
            "Instance",
            "query_result(sort_desc(count by (instance) "
            f'({endurance.RATED_ENDURANCE.name}{{{selector}, job=~"$job"}}) + 1'
            f' or 0 * count by (instance) ({scrape_metrics.UP.name}{{{selector}, job=~"$job"}})))',
            "SQL Server targets, as the scrape job labels them; those with SSD pools (ssd_pools in the "
            "exporter's config) are listed first.",
            regex='/instance="([^"]+)"/',
            sort=0,
        )
    return [
        *([] if datasource_pinned() else [datasource_variable()]),
        query_variable(
            "job",
            "Job",
            f"label_values({scrape_metrics.UP.name}{{{selector}}}, job)",
            "The Prometheus job(s) scraping the exporter (those the recording rules' selector matches).",
            multi=multi,
            all_value=all_value,
        ),
        instance,
        *(extra or []),
    ]


def alert_annotations() -> list[Json]:
    return [
        prometheus_annotation(
            "Firing alerts",
            # One mark where the condition began (ALERTS_FOR_STATE's value is that time), for alerts that
            # went on to fire; not a region, which painted every panel red while any alert fired.
            f"ALERTS_FOR_STATE{{{instance()}}} * 1000\n"
            f'and ignoring (alertstate) ALERTS{{alertstate="firing", {instance()}}}',
            RED,
            "{{alertname}}",
            "{{severity}} on {{instance}}: the condition began here and held for the alert's for: time",
            "alertname,severity",
            value_is_time=True,
        ),
        prometheus_annotation(
            "SQL Server restarts",
            # The start time itself, as the mark's time: one mark at the real start, also when a scrape
            # gap longer than any window hides the change (changes() over a window would miss it).
            f"{m(sys_info.START_TIME.name)} * 1000",
            BLUE,
            "SQL Server started",
            "{{instance}} started: the buffer pool was empty, tempdb was recreated and every counter began"
            " again from 0.",
            "instance",
            value_is_time=True,
        ),
    ]


def failover_annotation(lim: Limits) -> Json:
    """A mark where a target's availability-group role changed (mssql_ag_replica_is_primary moved), for
    the panels where a failover shows: PLE and memory (the new primary's cache is cold for its reads) and
    tempdb and drive writes (the old primary's writes become redo). Both replicas are marked, each saying
    what it is now: a band from the change over one rate window."""
    role = m(availability_groups.REPLICA_IS_PRIMARY.name)
    now = (
        f'  label_replace({role} == 1, "now", "the primary", "", "")\n'
        # Grafana drops an annotation sample whose value is not above 0: the old primary's role, 0, is
        # made 1 here, or only the new primary was marked.
        f'  or label_replace({role} + 1 == 1, "now", "a secondary", "", "")'
    )
    return prometheus_annotation(
        "Availability group role changes",
        f"(\n{now}\n)\nand on (job, instance, availability_group, replica) changes({role}[{lim.window}]) > 0",
        ORANGE,
        "{{replica}} is now {{now}} of {{availability_group}}",
        "{{instance}} became {{now}} of availability group {{availability_group}}: the alerts that follow"
        " the primary move with it (docs/alerts.md).",
        "instance,availability_group",
    )


def low_memory_annotation(lim: Limits) -> Json:
    """A mark where SQL Server's resource monitor broadcast LOW memory (the resource_monitor collector), for
    the page life expectancy graph: a drop in PLE right after a mark is SQL Server emptying its own caches,
    and the mark says whether the pressure came from inside the process or from the OS."""
    notifications = m(resource_monitor.NOTIFICATIONS_TOTAL.name, 'notification=~"physical_low|virtual_low"')
    return prometheus_annotation(
        "Low memory notifications",
        f"sum by (job, instance, source, node) (increase({notifications}[$__rate_interval])) > 0",
        RED,
        "LOW memory ({{source}}), node {{node}}",
        "{{instance}}: SQL Server's resource monitor broadcast LOW memory on node {{node}}; source: process ="
        " pressure from inside SQL Server, system = from the OS. Its caches shrink: page life expectancy"
        " falls after it.",
        "instance,source,node",
    )


def header_links(lim: Limits, this: str) -> list[Json]:
    targets = {
        MEMORY_UID: ("Memory pressure", "Per instance: Dell Table 4 counters, PLE per NUMA node, memory"),
        ENDURANCE_UID: ("tempdb and SSD endurance", "Per instance: tempdb writes and SSD pool endurance"),
        FLEET_UID: ("Fleet capacity review", "Every instance in one sortable table"),
    }
    links = [
        dashboard_link(title, site_uid(uid), tip) for uid, (title, tip) in targets.items() if uid != this
    ]
    links.append(
        external_link(
            "Runbooks",
            lim.spec.runbook_base_url,
            "What each alert means, its impact, diagnosis and mitigation",
        )
    )
    return links


def dashboard_url(uid: str) -> str:
    return f"/d/{site_uid(uid)}"


def instance_links() -> Json:
    """Data links from an instance cell into the per-instance dashboards, with this range and source."""
    params = "var-job=${__data.fields.job}&var-instance=${__value.raw}&${__url_time_range}"
    if not datasource_pinned():
        params = "var-datasource=${datasource}&" + params
    return override(
        "instance",
        (
            "links",
            [
                {
                    "title": "Memory pressure of ${__value.raw}",
                    "url": f"{dashboard_url(MEMORY_UID)}?{params}",
                },
                {
                    "title": "tempdb and SSD endurance of ${__value.raw}",
                    "url": f"{dashboard_url(ENDURANCE_UID)}?{params}",
                },
            ],
        ),
    )
