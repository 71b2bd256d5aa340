"""The files of an import, read safely from a file, a directory tree or an archive
(docs/traces.md, "Files, trees and archives"). Pure: no Django.

Everything here is untrusted input, and nothing is ever written to disk: each member is a
stream read once, through a counter. Refused with an error naming the member, before it can
fill memory or disk:
- more members than `max_members`, more uncompressed bytes than `max_total_bytes` in all or
  `max_member_bytes` in one, containers nested deeper than `max_nesting`;
- a member that expands more than `max_ratio` times its compressed size, or past the size its
  zip entry declares (a zip or gzip bomb: the counter stops it mid-stream, whatever the
  headers say);
- a path that is absolute or climbs out (`../`), a link (symbolic or hard), a device, a pipe
  or a socket — in an archive and in a directory tree alike (a tree is read without following
  links).
"""

import gzip
import io
import os
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .model import RecordError, TraceRejected

_GZIP = b"\x1f\x8b"
_ZIP = (b"PK\x03\x04", b"PK\x05\x06")
_CHUNK = 1 << 16
# A spooled zip inside another container stays in memory up to this, then goes to a
# temporary file (zip needs random access; its bytes count against the total like any).
_SPOOL_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    max_members: int = 100_000
    max_total_bytes: int = 8 * 1024**3
    max_member_bytes: int = 1024**3
    max_ratio: int = 250
    max_nesting: int = 3
    max_depth: int = 64
    # Ratios are judged once this much has come out: a tiny file compresses oddly.
    ratio_floor: int = 64 * 1024


DEFAULT_LIMITS = Limits()
# A request body or an upload is tens of megabytes: what it may expand to when it is an archive.
REQUEST_LIMITS = Limits(max_total_bytes=1024**3, max_member_bytes=512 * 1024**2)


class ArchiveRefused(TraceRejected):
    def __init__(self, where: str, message: str):
        super().__init__([RecordError(where, "", message)])


@dataclass
class Member:
    """One file to read: its name (the path inside the source) and its bytes as a stream."""

    name: str
    stream: BinaryIO


class _Budget:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.members = 0
        self.total = 0

    def count_member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise ArchiveRefused(name, f"more than {self.limits.max_members} files: refused")


class _Counted(io.RawIOBase):
    """A member's bytes, counted as they are read: past a limit, the read raises."""

    def __init__(self, raw, name: str, budget: _Budget, *, packed=None, declared=None):
        self.raw, self.name, self.budget = raw, name, budget
        self.packed = packed  # () -> compressed bytes consumed so far
        self.declared = declared
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self.raw.read(len(buffer))
        except (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile) as exc:
            # A member cut short or corrupt is found as it is read, wherever that is.
            raise ArchiveRefused(self.name, f"cannot be read: {exc}") from None
        n = len(data)
        buffer[:n] = data
        self._charge(n)
        return n

    def _charge(self, n: int) -> None:
        limits = self.budget.limits
        self.count += n
        self.budget.total += n
        if self.declared is not None and self.count > self.declared:
            raise ArchiveRefused(self.name, "expands past the size its entry declares: refused")
        if self.count > limits.max_member_bytes:
            raise ArchiveRefused(
                self.name, f"expands past {limits.max_member_bytes} bytes: refused"
            )
        if self.budget.total > limits.max_total_bytes:
            raise ArchiveRefused(
                self.name,
                f"the files expand past {limits.max_total_bytes} bytes in all: refused",
            )
        if self.packed is not None and self.count > limits.ratio_floor:
            packed = max(self.packed(), 1)
            if self.count > packed * limits.max_ratio:
                raise ArchiveRefused(
                    self.name,
                    f"expands more than {limits.max_ratio} times its compressed size "
                    "(a compression bomb): refused",
                )


def _stream(raw: io.RawIOBase) -> BinaryIO:
    return io.BufferedReader(raw, _CHUNK)


def _check_path(name: str, where: str, limits: Limits) -> str:
    path = name.replace("\\", "/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise ArchiveRefused(where, f"member {name!r} has an absolute path: refused")
    if ".." in parts:
        raise ArchiveRefused(where, f"member {name!r} climbs out of the archive: refused")
    if len(parts) > limits.max_depth:
        raise ArchiveRefused(where, f"member {name!r} is nested too deep: refused")
    return "/".join(parts)


def container_of(head: bytes, name: str) -> str | None:
    """zip | gzip | tar | None (a plain file), by the bytes, not the name."""
    if head[:4] in _ZIP:
        return "zip"
    if head[:2] == _GZIP:
        return "gzip"
    if len(head) > 262 and head[257:262] == b"ustar":
        return "tar"
    return None


def _peek(stream: BinaryIO, size: int = 512) -> bytes:
    if hasattr(stream, "peek"):
        return stream.peek(size)[:size]
    return b""


def members(source: Path | bytes, *, name: str = "", limits: Limits = Limits()) -> Iterator[Member]:
    """Every file of a source — a path (a file or a directory tree) or a request body — as a
    stream, containers opened (up to `limits.max_nesting` deep)."""
    budget = _Budget(limits)
    if isinstance(source, bytes):
        raw = _Counted(io.BytesIO(source), name or "body", budget)
        yield from _open(_stream(raw), name or "body", budget, 0)
        return
    if source.is_dir():
        yield from _tree(source, budget)
        return
    handle = open(source, "rb")  # noqa: SIM115 - closed once its members are read
    with handle:
        raw = _Counted(handle, str(source), budget)
        yield from _open(_stream(raw), name or source.name, budget, 0, path=source)


def _tree(root: Path, budget: _Budget) -> Iterator[Member]:
    for directory, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for entry in sorted(files) + [d for d in dirs if os.path.islink(Path(directory, d))]:
            path = Path(directory, entry)
            relative = path.relative_to(root).as_posix()
            _check_path(relative, str(root), budget.limits)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise ArchiveRefused(relative, "is a symbolic link: refused")
            if not stat.S_ISREG(mode):
                raise ArchiveRefused(
                    relative, "is not a regular file (a device, pipe or socket): refused"
                )
            with open(path, "rb") as handle:
                raw = _Counted(handle, str(path), budget)
                yield from _open(_stream(raw), str(path), budget, 0, path=path)


def _open(stream: BinaryIO, name: str, budget: _Budget, depth: int, path: Path | None = None):
    kind = container_of(_peek(stream), name)
    if kind is None:
        budget.count_member(name)
        yield Member(name, stream)
        return
    if depth >= budget.limits.max_nesting:
        raise ArchiveRefused(
            name, f"containers nested more than {budget.limits.max_nesting} deep: refused"
        )
    if kind == "zip":
        yield from _zip(stream, name, budget, depth, path)
    elif kind == "tar":
        yield from _tar(stream, name, budget, depth)
    else:
        yield from _gzip(stream, name, budget, depth)


def _gzip(stream: BinaryIO, name: str, budget: _Budget, depth: int):
    packed = _Position(stream)
    unpacked = gzip.GzipFile(fileobj=packed, mode="rb")
    inner = name.removesuffix(".gz").removesuffix(".tgz") or name
    raw = _Counted(unpacked, inner, budget, packed=lambda: packed.consumed)
    try:
        reader = _stream(raw)
        if container_of(_peek(reader), inner) == "tar":
            yield from _tar(reader, name, budget, depth + 1)
        else:
            budget.count_member(inner)
            yield Member(inner, reader)
    except (OSError, EOFError, zlib.error) as exc:
        raise ArchiveRefused(name, f"not a readable gzip file: {exc}") from None


class _Position(io.RawIOBase):
    """A stream that remembers how many bytes were taken from it (the compressed side)."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        self.consumed += len(data)
        return len(data)


def _tar(stream: BinaryIO, name: str, budget: _Budget, depth: int):
    try:
        archive = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115 - streamed, read once
        for info in archive:
            inner = _check_path(info.name, name, budget.limits)
            where = f"{name}:{inner}"
            if info.issym() or info.islnk():
                raise ArchiveRefused(where, "is a link: refused")
            if info.isdir():
                continue
            if not info.isreg():
                raise ArchiveRefused(
                    where, "is not a regular file (a device, pipe or socket): refused"
                )
            raw = _Counted(archive.extractfile(info), where, budget, declared=info.size)
            yield from _open(_stream(raw), where, budget, depth + 1)
    except tarfile.TarError as exc:
        raise ArchiveRefused(name, f"not a readable tar archive: {exc}") from None


def _zip(stream: BinaryIO, name: str, budget: _Budget, depth: int, path: Path | None):
    spool = None
    if path is None or depth > 0 or not hasattr(stream, "seek"):
        spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
        while chunk := stream.read(_CHUNK):
            spool.write(chunk)
        spool.seek(0)
    try:
        with zipfile.ZipFile(spool or path) as archive:
            yield from _zip_members(archive, name, budget, depth)
    except zipfile.BadZipFile as exc:
        raise ArchiveRefused(name, f"not a readable zip archive: {exc}") from None
    finally:
        if spool is not None:
            spool.close()


def _zip_members(archive: zipfile.ZipFile, name: str, budget: _Budget, depth: int):
    limits = budget.limits
    infos = archive.infolist()
    if len(infos) > limits.max_members:
        raise ArchiveRefused(
            name, f"holds {len(infos)} entries, more than {limits.max_members}: refused"
        )
    declared = sum(i.file_size for i in infos)
    if declared > limits.max_total_bytes:
        raise ArchiveRefused(
            name, f"declares {declared} bytes, more than {limits.max_total_bytes}: refused"
        )
    for info in infos:
        inner = _check_path(info.filename, name, limits)
        where = f"{name}:{inner}"
        if stat.S_ISLNK(info.external_attr >> 16):
            raise ArchiveRefused(where, "is a link: refused")
        if info.is_dir():
            continue
        if (
            info.file_size > limits.ratio_floor
            and info.file_size > max(info.compress_size, 1) * limits.max_ratio
        ):
            raise ArchiveRefused(
                where,
                f"declares {info.file_size} bytes from {info.compress_size} "
                f"(more than {limits.max_ratio} times: a compression bomb): refused",
            )
        with archive.open(info) as handle:
            raw = _Counted(
                handle,
                where,
                budget,
                declared=info.file_size,
                packed=lambda i=info: i.compress_size,
            )
            yield from _open(_stream(raw), where, budget, depth + 1)
