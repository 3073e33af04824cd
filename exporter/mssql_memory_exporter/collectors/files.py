"""The instance's database files: names, paths and volumes, learnt on the slow cadence.

Not a collector: tempdb, volumes and hybrid_buffer_pool read it. The per-scrape counters
(sys.dm_io_virtual_file_stats) carry only ids and numbers; names and paths come from sys.master_files
every `volume_refresh_seconds`, so a 10,000-file instance does not send 10,000 paths every scrape.

A file's volume, in this order:
  1. the target's `volume_map` (longest directory prefix), which the user knows best;
  2. the host's mount table, when the exporter runs on the SQL Server host (`colocated`);
  3. on Windows, sys.dm_os_volume_stats, asked once per directory on the slow cadence (the drive root
     when it fails or names no mount point; asked again with a later refresh);
  4. the file's directory (Linux SQL Server reports no mount points).
"""

from __future__ import annotations

import logging
import ntpath
import posixpath
import weakref
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ..metrics.builder import MissingData
from .base import EXTRA_SECTIONS, FORCE_SLOW, ScrapeContext, Section, SectionResult

log = logging.getLogger(__name__)

FILES_TAG = "files"
VOLUMES_TAG = "volumes"  # each lookup is its own section, tagged "volumes/<database_id>/<file_id>"
MEMO_KEY = "file_catalog"
# dm_os_volume_stats costs a call per file: one refresh asks for at most this many directories, and
# the rest follow with the next scrapes, so a server with a folder per database cannot make one batch
# outlast the query timeout.
MAX_VOLUME_LOOKUPS = 50

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
    # Directories whose lookup failed or named no mount point, with when (ctx.now): their files keep the
    # drive root, and the lookup is asked again with a refresh at least half a refresh interval later.
    lookups_failed: dict[str, float] = field(default_factory=dict)
    lookups_pending: set[str] = field(default_factory=set)  # never answered yet: their files wait
    lookups_inflight: dict[str, str] = field(default_factory=dict)  # section tag -> directory, next batch
    invisible: set[tuple[int, int]] = field(default_factory=set)  # files a refresh could not name
    # Labels that are a file's directory standing in for a volume nobody named (rule 4 above): a pool
    # or PMEM volume holds such a label when it contains the directory, not only when it equals it.
    directory_labels: set[str] = field(default_factory=set)

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
        mapped = _longest_prefix(f.path, ctx.target.volume_map, f.windows)
        if mapped is not None:
            return canonical_volume(mapped)
        if ctx.host is not None:
            mount = ctx.host.mount_point_for(f.path)
            if mount:
                return canonical_volume(mount)
        if f.windows:
            if f.directory.casefold() in self.lookups_pending:
                return None
            known = self.mount_of_directory.get(f.directory.casefold())
            return canonical_volume(known or _root(f.path))
        label = canonical_volume(f.directory)
        self.directory_labels.add(label)
        return label

    def holder_of(self, label: str, volumes: Collection[str]) -> str | None:
        """Which of the configured `volumes` (pool volumes, PMEM volumes) a file labelled `label` is on:
        the one equal to it (Windows paths ignoring case), or, for a directory label, the longest one
        that contains it on a path boundary. A real mount point below a configured volume is a volume of
        its own, so for mount labels only equality counts."""
        windows = _is_windows(label)
        subject = label.casefold() if windows else label
        directory = label in self.directory_labels
        best: str | None = None
        for volume in volumes:
            if _is_windows(volume) != windows:
                continue
            candidate = volume.casefold() if windows else volume
            if candidate == subject:
                return volume
            inside = directory and _contains(candidate, subject, "\\" if windows else "/")
            if inside and (best is None or len(volume) > len(best)):
                best = volume
        return best

    def unmatched(self, volumes: Collection[str], ctx: ScrapeContext) -> set[str]:
        """The configured volumes that hold none of the instance's files."""
        held = {self.holder_of(v, volumes) for f in self.files.values() if (v := self.volume_of(f, ctx))}
        return set(volumes) - held


def canonical_volume(volume: str) -> str:
    """The spelling a reported volume is compared in (no validation: SQL Server and the mount table are
    trusted; config labels are checked by config.normalize_volume, which also ends in this spelling).
    Windows roots and mount folders end in a backslash (as SQL Server writes
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


def _contains(parent: str, path: str, sep: str) -> bool:
    return path.startswith(parent.rstrip(sep) + sep)


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
    changed = _settle_volume_lookups(results, cat, ctx) or changed
    if changed:
        cat.forget_volumes()
    if names is not None and names.error is None:
        # After this scrape's answers are in, so a directory just resolved is not asked again.
        _plan_volume_lookups(cat, ctx)
    return cat


def _settle_volume_lookups(
    results: Mapping[str, SectionResult], cat: FileCatalog, ctx: ScrapeContext
) -> bool:
    """Each lookup is its own section, so one directory's failure settles that directory alone: it keeps
    its drive root until a later refresh asks again, and the others take the mount points they got."""
    failed: list[tuple[str, str]] = []
    answered = False
    for tag, directory in list(cat.lookups_inflight.items()):
        result = results.get(tag)
        if result is None:
            continue  # not in this batch: the plan made with the next refresh asks again
        del cat.lookups_inflight[tag]
        cat.lookups_pending.discard(directory)
        answered = True
        mount = None
        if result.error is None:
            mount = next(
                (r.get("volume_mount_point") for r in result.rows if r.get("volume_mount_point")), None
            )
        if mount:
            cat.mount_of_directory[directory] = str(mount)
            cat.lookups_failed.pop(directory, None)
            continue
        cat.lookups_failed[directory] = ctx.now
        why = f"{result.error.number}: {result.error.message}" if result.error else "no mount point"
        failed.append((directory, why))
    if failed:
        log.warning(
            "volume lookup failed; files keep their drive root as volume until a later refresh",
            extra={
                "target": ctx.target.name,
                "directories": len(failed),
                "directory": failed[0][0],
                "err": failed[0][1],
            },
        )
    return answered


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
    the config's volume_map nor the host's mount table already answers, at most MAX_VOLUME_LOOKUPS at a
    time, and a directory whose lookup failed only again with a refresh on the slow cadence (never every
    scrape: a refusal would otherwise cost a lookup and the whole file list each time)."""
    cat.lookups_inflight = {}
    if ctx.host is not None:
        cat.lookups_pending.clear()
        return
    volume_map = ctx.target.volume_map
    retry_after = ctx.target.volume_refresh_seconds / 2
    wanted: dict[str, list[DbFile]] = {}
    for f in cat.files.values():
        directory = f.directory.casefold()
        if not f.windows or directory in cat.mount_of_directory:
            continue
        failed_at = cat.lookups_failed.get(directory)
        if failed_at is not None and ctx.now - failed_at < retry_after:
            continue
        if _longest_prefix(f.path, volume_map, windows=True) is None:
            wanted.setdefault(directory, []).append(f)
    # Directories never answered wait (unlabelled) for their first answer; retried ones keep the root.
    cat.lookups_pending = {d for d in wanted if d not in cat.lookups_failed}
    if not wanted:
        return
    # The directories with the most files first: they carry most of the labels.
    order = sorted(wanted, key=lambda d: (-len(wanted[d]), d))[:MAX_VOLUME_LOOKUPS]
    sections = []
    for directory in order:
        f = wanted[directory][0]
        section = volume_lookup(f.database_id, f.file_id)
        cat.lookups_inflight[section.tag] = directory
        sections.append(section)
    ctx.memo[EXTRA_SECTIONS] = sections
    ctx.memo[FORCE_SLOW] = True


def volume_lookup(database_id: int, file_id: int) -> Section:
    tag = f"{VOLUMES_TAG}/{int(database_id)}/{int(file_id)}"
    return Section(
        tag=tag,
        sql=f"SELECT N'{tag}' AS section, vs.database_id, vs.file_id, vs.volume_mount_point\n"
        f"FROM sys.dm_os_volume_stats({int(database_id)}, {int(file_id)}) AS vs;",
        requires=("sys.dm_os_volume_stats",),
        may_be_empty=True,
        slow=True,
    )
