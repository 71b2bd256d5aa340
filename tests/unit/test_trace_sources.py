"""Archives and trees are untrusted (docs/traces.md, "Files, trees and archives"): bombs,
climbing paths, links and devices are refused with an error naming the member, before they
can fill memory or disk; what is sound is read member by member. The bomb-shaped files are
made here, in the test, with small limits so each runs in a blink."""

import gzip
import io
import os
import tarfile
import zipfile

import pytest

from traces.sources import ArchiveRefused, Limits, members

LOG = b'{"type":"user","sessionId":"s","message":{"role":"user","content":"hi"}}\n'
SMALL = Limits(
    max_members=10, max_total_bytes=4 * 1024**2, max_member_bytes=2 * 1024**2, ratio_floor=1024**2
)


def read_all(source, limits=SMALL, name="upload") -> dict[str, bytes]:
    return {m.name: m.stream.read() for m in members(source, name=name, limits=limits)}


def refused(source, limits=SMALL, name="upload") -> str:
    with pytest.raises(ArchiveRefused) as caught:
        read_all(source, limits, name)
    return str(caught.value)


def tar_bytes(entries, mode="w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for info, data in entries:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def file_info(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def zip_bytes(entries: dict[str, bytes], **kwargs) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, **kwargs) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_tar_gz_is_read_member_by_member_directories_skipped():
    folder = tarfile.TarInfo("logs")
    folder.type = tarfile.DIRTYPE
    body = tar_bytes(
        [(folder, None), file_info("logs/a.jsonl", LOG), file_info("logs/b.jsonl", LOG)]
    )
    assert read_all(body) == {"upload:logs/a.jsonl": LOG, "upload:logs/b.jsonl": LOG}


def test_a_zip_with_gzipped_logs_inside_is_read_through():
    body = zip_bytes({"day1/a.jsonl.gz": gzip.compress(LOG), "b.jsonl": LOG})
    assert read_all(body) == {"upload:day1/a.jsonl": LOG, "upload:b.jsonl": LOG}


def test_a_gzip_bomb_is_refused_by_its_ratio_before_it_is_read_out():
    bomb = gzip.compress(b"\0" * (3 * 1024**2), compresslevel=9)  # ~3 KB that says 3 MB
    assert len(bomb) < 10_000
    limits = Limits(max_member_bytes=10 * 1024**2, ratio_floor=1024**2)
    assert "compression bomb" in refused(bomb, limits, name="logs.jsonl.gz")


def test_a_gzip_that_expands_past_the_total_is_refused():
    body = gzip.compress(os.urandom(600 * 1024) * 8)  # compresses poorly per block, 4.8 MB out
    message = refused(body, Limits(max_total_bytes=1024**2, max_ratio=10_000))
    assert "past 1048576 bytes in all" in message


def test_a_zip_bomb_is_refused_from_its_declared_sizes():
    bomb = zip_bytes({"huge.jsonl": b"\0" * (3 * 1024**2)})
    assert "compression bomb" in refused(bomb, Limits(max_member_bytes=10 * 1024**2))


def test_a_zip_whose_entry_lies_about_its_size_is_stopped_at_the_declared_size():
    data = LOG * 200
    body = bytearray(zip_bytes({"a.jsonl": data}))
    declared = 1000
    # The size is written in the local header (offset 22) and in the central directory entry
    # (offset 24 after its signature); both are made to say less than what is compressed.
    local = body.index(b"PK\x03\x04")
    body[local + 22 : local + 26] = declared.to_bytes(4, "little")
    central = body.index(b"PK\x01\x02")
    body[central + 24 : central + 28] = declared.to_bytes(4, "little")
    with pytest.raises((ArchiveRefused, zipfile.BadZipFile)):
        read_all(bytes(body))
    # What did come out is at most the declared size: the counter stops it there.
    archive = zipfile.ZipFile(io.BytesIO(bytes(body)))
    assert archive.getinfo("a.jsonl").file_size == declared


@pytest.mark.parametrize(
    "name", ["../../etc/cron.d/x.jsonl", "/etc/passwd", "a/../../b.jsonl", "C:\\x.jsonl"]
)
def test_a_tar_member_that_climbs_out_or_is_absolute_is_refused(name):
    message = refused(tar_bytes([file_info(name, LOG)]))
    assert "absolute path" in message or "climbs out" in message


def test_a_zip_member_that_climbs_out_is_refused():
    assert "climbs out" in refused(zip_bytes({"../evil.jsonl": LOG}))


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_links_in_a_tar_are_refused(kind):
    link = tarfile.TarInfo("logs/a.jsonl")
    link.type, link.linkname = kind, "/etc/shadow"
    assert "is a link" in refused(tar_bytes([(link, None)]))


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_devices_and_pipes_in_a_tar_are_refused(kind):
    device = tarfile.TarInfo("dev/zero")
    device.type = kind
    assert "not a regular file" in refused(tar_bytes([(device, None)]))


def test_a_symbolic_link_in_a_zip_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("logs/a.jsonl")
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "/etc/shadow")
    assert "is a link" in refused(buffer.getvalue())


def test_too_many_members_are_refused():
    body = tar_bytes([file_info(f"{i}.jsonl", LOG) for i in range(11)])
    assert "more than 10 files" in refused(body)


def test_containers_nested_too_deep_are_refused():
    inner = zip_bytes({"a.jsonl": LOG})
    for _ in range(3):
        inner = zip_bytes({"next.zip": inner})
    assert "nested more than 3 deep" in refused(inner)


def test_a_tree_is_read_without_following_links_and_refuses_them(tmp_path):
    (tmp_path / "projects").mkdir()
    (tmp_path / "projects" / "a.jsonl").write_bytes(LOG)
    assert list(read_all(tmp_path, name="")) == [str(tmp_path / "projects" / "a.jsonl")]
    (tmp_path / "projects" / "b.jsonl").symlink_to("/etc/passwd")
    assert "symbolic link" in refused(tmp_path)


def test_a_pipe_in_a_tree_is_refused_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "session.jsonl")
    assert "not a regular file" in refused(tmp_path)


def test_an_archive_cut_short_is_an_error_naming_it_not_a_crash():
    body = tar_bytes([file_info("logs/a.jsonl", LOG * 2000)])
    with pytest.raises(ArchiveRefused) as caught:
        read_all(body[: len(body) // 2])
    assert "cannot be read" in str(caught.value) or "not a readable" in str(caught.value)


def test_a_corrupt_zip_member_is_an_error_naming_it():
    body = bytearray(zip_bytes({"a.jsonl": LOG * 500}))
    start = body.index(b"PK\x03\x04") + 30 + len("a.jsonl")
    body[start + 10 : start + 20] = b"\xff" * 10
    with pytest.raises(ArchiveRefused) as caught:
        read_all(bytes(body))
    assert "upload:a.jsonl" in str(caught.value)
