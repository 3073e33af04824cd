"""The collector modules, in the order their sections appear in the batch.

To add a metric: declare it in one module here (its `metrics`, metrics/declare.py), give the stand-in
its rows, and run `make generate` for its docs table. To add a module: give it a
`COLLECTOR = CollectorRecord(...)` with its declarations and list it below.
"""

from __future__ import annotations

from . import (
    availability_groups,
    availability_recovery,
    buffer_manager,
    buffer_node,
    buffer_pool_extension,
    hybrid_buffer_pool,
    memory_clerks,
    memory_config,
    memory_health,
    memory_manager,
    memory_node,
    os_memory,
    plan_cache,
    resource_monitor,
    resource_semaphores,
    server_properties,
    sql_statistics,
    ssd_pools,
    sys_info,
    tempdb,
    tempdb_files,
    tempdb_governance,
    tempdb_log,
    tempdb_usage,
    tempdb_volumes,
    volumes,
    wait_stats,
)
from .base import CollectorRecord

# Each collector reads only the rows of this scrape (volumes reads the start tick from sys_info's rows
# itself), so the order matters only where noted.
COLLECTORS: tuple[CollectorRecord, ...] = tuple(
    module.COLLECTOR
    for module in (
        server_properties,
        sys_info,
        buffer_manager,
        buffer_node,
        memory_manager,
        memory_node,
        os_memory,
        memory_config,
        resource_semaphores,
        resource_monitor,
        memory_clerks,
        plan_cache,
        wait_stats,
        sql_statistics,
        tempdb,
        tempdb_files,
        tempdb_usage,
        tempdb_volumes,
        tempdb_log,
        tempdb_governance,
        volumes,
        ssd_pools,  # after volumes: it sums the volume totals of this scrape
        hybrid_buffer_pool,
        buffer_pool_extension,
        availability_groups,
        availability_recovery,  # after availability_groups: it reads that one's sections
        memory_health,  # SQL Server 2025+: left out where its view is missing
    )
)
