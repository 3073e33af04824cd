"""The instance's database files: names, paths and volumes, learnt on the slow cadence.

Not a collector: tempdb, volumes and hybrid_buffer_pool read it. The per-scrape counters
(sys.dm_io_virtual_file_stats) carry only ids and numbers; names and paths come from sys.master_files
every `volume_refresh_seconds`, so a 10,000-file instance does not send 10,000 paths every scrape.

A file's volume, in this order:
  1. the target's `volume_map` (longest directory prefix), which the user knows best;
  2. the host's mount table, when the exporter runs on the SQL Server host (`colocated`);
  3. on Windows, sys.dm_os_volume_stats, asked once per directory on the slow cadence (the drive root
     until then);
  4. the file's directory (Linux SQL Server reports no mount points).
"""

from __future__ import annotations

import logging
import ntpath
import posixpath
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field

from .base import EXTRA_SECTIONS, FORCE_SLOW, MissingData, ScrapeContext, Section, SectionResult

log = logging.getLogger(__name__)

FILES_TAG = "files"
VOLUMES_TAG = "volumes"
MEMO_KEY = "file_catalog"

FILES_SECTION = Section(
    tag=FILES_TAG,
    sql="SELECT N'files' AS section, mf.database_id, mf.file_id, mf.name, mf.physical_name,"
    " mf.type, mf.size\n"
    "FROM sys.master_files AS mf;",
    requires=("sys.master_files",),
    slow=True,
)

FILE_TYPES = {0: "data", 1: "log"}
PAGE_BYTES = 8192


@dataclass(frozen=True)
class DbFile:
    database_id: int
    file_id: int
    name: str
    path: str
    file_type: str  # data | log | other
    size_bytes: int

    @property
    def windows(self) -> bool:
        return _is_windows(self.path)

    @property
    def directory(self) -> str:
        return ntpath.dirname(self.path) if self.windows else posixpath.dirname(self.path)


@dataclass
class FileCatalog:
    files: dict[tuple[int, int], DbFile] = field(default_factory=dict)
    mount_of_directory: dict[str, str] = field(default_factory=dict)  # from sys.dm_os_volume_stats
    refreshed: bool = False  # at least one refresh succeeded
    # Volumes change only when the catalog does: resolved once per file per refresh, not per scrape.
    _volumes: dict[tuple[int, int], str] = field(default_factory=dict)
    generation: int = 0  # bumped whenever names or volumes may have changed
    lookups_tried: set[str] = field(default_factory=set)  # directories sys.dm_os_volume_stats answered for
    lookups_pending: set[str] = field(default_factory=set)  # directories asked, answer not in yet
    invisible: set[tuple[int, int]] = field(default_factory=set)  # files a refresh could not name

    def volume_of(self, f: DbFile, ctx: ScrapeContext) -> str | None:
        """The file's volume label, or None while its directory's volume lookup is still out: a label
        given now and corrected later would leave a series behind."""
        key = (f.database_id, f.file_id)
        volume = self._volumes.get(key)
        if volume is None:
            volume = self._resolve(f, ctx)
            if volume is not None:
                self._volumes[key] = volume
        return volume

    def forget_volumes(self) -> None:
        self._volumes.clear()
        self.generation += 1

    def _resolve(self, f: DbFile, ctx: ScrapeContext) -> str | None:
        mapped = _longest_prefix(f.path, getattr(ctx.target, "volume_map", None) or {}, f.windows)
        if mapped is not None:
            return normalise_volume(mapped)
        if ctx.host is not None:
            mount = ctx.host.mount_point_for(f.path)
            if mount:
                return normalise_volume(mount)
        if f.windows:
            if f.directory.casefold() in self.lookups_pending:
                return None
            known = self.mount_of_directory.get(f.directory.casefold())
            return normalise_volume(known or _root(f.path))
        return normalise_volume(f.directory)


def normalise_volume(volume: str) -> str:
    """One spelling per volume: Windows roots and mount folders end in a backslash (as SQL Server writes
    them), POSIX paths have no trailing slash (but "/" stays "/")."""
    if _is_windows(volume):
        # SQL Server keeps file paths as typed at creation, so both t: and T: occur; pools are configured
        # with upper-case letters (config.normalize_volume).
        volume = volume[0].upper() + volume[1:] if volume[1] == ":" else volume
        return volume if volume.endswith("\\") else volume + "\\"
    return volume.rstrip("/") or "/"


def _root(path: str) -> str:
    """The drive (`T:\\`) or share (`\\\\server\\share\\`) a Windows path lives on."""
    if path.startswith("\\\\"):
        parts = path[2:].split("\\")
        return "\\\\" + "\\".join(parts[:2]) + "\\"
    return path[:3]


def _is_windows(path: str) -> bool:
    return (len(path) > 1 and path[1] == ":") or path.startswith("\\\\")


def _longest_prefix(path: str, mapping: Mapping[str, str], windows: bool) -> str | None:
    best: tuple[int, str] | None = None
    sep = "\\" if windows else "/"
    subject = path.casefold() if windows else path
    for prefix, volume in mapping.items():
        p = prefix.casefold() if windows else prefix
        p = p.rstrip(sep) + sep
        if subject.startswith(p) and (best is None or len(p) > best[0]):
            best = (len(p), volume)
    return best[1] if best else None


def catalog(ctx: ScrapeContext) -> FileCatalog:
    found = ctx.memo.get(MEMO_KEY)
    if not isinstance(found, FileCatalog):
        found = FileCatalog()
        ctx.memo[MEMO_KEY] = found
    return found


def update(results: Mapping[str, SectionResult], ctx: ScrapeContext) -> FileCatalog:
    """Fold this scrape's slow sections (if it carried them) into the target's catalog. Runs once per
    scrape however many collectors call it."""
    cat = catalog(ctx)
    seen = ctx.memo.get("_catalog_scrape")
    if isinstance(seen, weakref.ref) and seen() is ctx:
        return cat
    ctx.memo["_catalog_scrape"] = weakref.ref(ctx)
    changed = False
    names = results.get(FILES_TAG)
    if names is not None and names.error is None:
        cat.files = {
            (int(r["database_id"]), int(r["file_id"])): DbFile(  # type: ignore[call-overload]
                int(r["database_id"]),  # type: ignore[call-overload]
                int(r["file_id"]),  # type: ignore[call-overload]
                str(r["name"]),
                str(r["physical_name"]),
                FILE_TYPES.get(int(r["type"]), "other"),  # type: ignore[call-overload]
                int(r["size"] or 0) * PAGE_BYTES,  # type: ignore[call-overload]
            )
            for r in names.rows
        }
        cat.refreshed = changed = True
    lookups = results.get(VOLUMES_TAG)
    if lookups is not None:
        # Answered (or refused): these directories are settled, with a mount point or their drive root.
        cat.lookups_tried |= cat.lookups_pending
        cat.lookups_pending.clear()
        changed = True
    if lookups is not None and lookups.error is not None:
        log.warning(
            "volume lookup failed; files keep their drive root as volume",
            extra={"err": f"{lookups.error.number}: {lookups.error.message}"},
        )
    elif lookups is not None:
        for r in lookups.rows:
            f = cat.files.get((int(r["database_id"]), int(r["file_id"])))  # type: ignore[call-overload]
            mount = r.get("volume_mount_point")
            if f is not None and mount:
                cat.mount_of_directory[f.directory.casefold()] = str(mount)
                changed = True
    if changed:
        cat.forget_volumes()
    if names is not None and names.error is None:
        # After this scrape's answers are in, so a directory just resolved is not asked again.
        _plan_volume_lookups(cat, ctx)
    return cat


def require_visible(
    keys: object, results: Mapping[str, SectionResult], cat: FileCatalog, ctx: ScrapeContext
) -> None:
    """Files that have I/O counters but no name: new since the last refresh (ask for one with the next
    scrape), or, if this very scrape refreshed the names, files the login may not see. sys.master_files
    shows other databases' files only with VIEW ANY DEFINITION; without it the totals would silently
    undercount, so the collector fails and says why."""
    unknown = {key for key in keys if key not in cat.files}  # type: ignore[attr-defined]
    if not unknown:
        return
    if FILES_TAG in results and results[FILES_TAG].error is None:
        cat.invisible = unknown  # the names were read this scrape and these are still missing
    elif unknown - cat.invisible:
        ctx.memo[FORCE_SLOW] = True  # files new since the last refresh: learn their names next scrape
        return
    raise MissingData(
        f"{len(unknown)} files have I/O counters but are not in sys.master_files: grant the login "
        "VIEW ANY DEFINITION (docs/permissions.md)"
    )


def _plan_volume_lookups(cat: FileCatalog, ctx: ScrapeContext) -> None:
    """Ask sys.dm_os_volume_stats once per Windows directory, with the next scrape: only where neither
    the config's volume_map nor the host's mount table already answers, and never twice for a directory
    (a refused or empty answer leaves the drive root as its volume instead of asking every scrape)."""
    if ctx.host is not None:
        return
    volume_map = getattr(ctx.target, "volume_map", None) or {}
    wanted: dict[str, DbFile] = {}
    for f in cat.files.values():
        directory = f.directory.casefold()
        if not f.windows or directory in cat.mount_of_directory or directory in cat.lookups_tried:
            continue
        if _longest_prefix(f.path, volume_map, windows=True) is None:
            wanted.setdefault(directory, f)
    cat.lookups_pending = set(wanted)
    if not wanted:
        return
    ctx.memo[EXTRA_SECTIONS] = [volume_lookup(f.database_id, f.file_id) for f in wanted.values()]
    ctx.memo[FORCE_SLOW] = True


def volume_lookup(database_id: int, file_id: int) -> Section:
    return Section(
        tag=VOLUMES_TAG,
        sql=f"SELECT N'volumes' AS section, vs.database_id, vs.file_id, vs.volume_mount_point\n"
        f"FROM sys.dm_os_volume_stats({int(database_id)}, {int(file_id)}) AS vs;",
        requires=("sys.dm_os_volume_stats",),
        may_be_empty=True,
        slow=True,
    )
