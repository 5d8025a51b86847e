"""Unpacking a submitted bot safely: one file, or a zip / tar archive, into a fresh directory.

Everything an upload can get wrong is an :class:`UploadError` whose message names the
offending entry and says what is allowed; a corrupt archive (bad CRC, a header that lies
about sizes, truncated data, an unsupported compression) is one too, never another
exception. Nothing is written outside the destination: absolute paths, ``..`` components,
links whose target leaves the archive, hard links, device files and FIFOs are refused
before anything is extracted; every link is resolved for real once all entries are
written (a chain of links that each look harmless on their own is caught), and the
declared and the actual sizes are both capped while extracting (a zip bomb or a lying
header stops at the limit). The files are made readable
by every user (directories 755, files 644, or 755 when executable in the archive) because
bots run as an unprivileged user when the server is root.
"""

from __future__ import annotations

import io
import os
import posixpath
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MAX_UPLOAD_BYTES = 3 << 20
"""Largest upload accepted (the gRPC message limit is 4 MiB)."""
MAX_UNPACKED_BYTES = 64 << 20
"""Largest total size of the unpacked files."""
MAX_ENTRIES = 2000
"""Most entries an archive may hold."""

ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")


class UploadError(ValueError):
    """The upload is refused; the message says which entry and why."""


@dataclass(frozen=True)
class _Entry:
    """One archive member, normalised."""

    path: str  # relative, normalised, '/'-separated
    kind: str  # file | dir | symlink
    size: int
    executable: bool
    link: str = ""
    opener: object = None  # returns a readable binary stream


def is_archive(filename: str) -> bool:
    return filename.lower().endswith(ARCHIVE_SUFFIXES)


def safe_member_path(name: str) -> str:
    """The normalised relative path of an archive member, or UploadError if it could escape."""
    if "\x00" in name:
        raise UploadError(f"the entry {name!r} has a NUL byte in its name")
    cleaned = name.replace("\\", "/")
    if cleaned.startswith("/") or (len(cleaned) > 1 and cleaned[1] == ":"):
        raise UploadError(f"the entry {name!r} has an absolute path; archive entries must be relative paths")
    parts = [p for p in cleaned.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UploadError(f"the entry {name!r} contains '..'; entries must stay inside the archive")
    return "/".join(parts)


def _check_link(path: str, target: str) -> None:
    if not target or target.startswith("/"):
        raise UploadError(
            f"the link {path!r} points to {target!r}, an absolute path; links must stay inside the upload"
        )
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if resolved == ".." or resolved.startswith("../"):
        raise UploadError(f"the link {path!r} points to {target!r}, outside the upload; links must stay inside it")


def _zip_entries(archive: zipfile.ZipFile) -> list[_Entry]:
    entries = []
    for info in archive.infolist():
        path = safe_member_path(info.filename)
        mode = info.external_attr >> 16
        if info.is_dir():
            entries.append(_Entry(path, "dir", 0, False))
        elif stat.S_ISLNK(mode):
            target = archive.read(info).decode("utf-8", "replace")
            entries.append(_Entry(path, "symlink", 0, False, target))
        elif stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # no type bits: a plain file from most zip tools
            raise UploadError(f"the entry {info.filename!r} is not a regular file, directory or link")
        else:
            entries.append(
                _Entry(path, "file", info.file_size, bool(mode & 0o111), opener=lambda i=info: archive.open(i))
            )
    return entries


def _tar_entries(archive: tarfile.TarFile) -> list[_Entry]:
    try:
        members = archive.getmembers()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise UploadError(f"the upload is not a valid tar archive ({exc})") from None
    entries = []
    for member in members:
        path = safe_member_path(member.name)
        if member.isdir():
            entries.append(_Entry(path, "dir", 0, False))
        elif member.issym():
            entries.append(_Entry(path, "symlink", 0, False, member.linkname))
        elif member.islnk():
            raise UploadError(f"the entry {member.name!r} is a hard link; use a copy or a relative symbolic link")
        elif member.isreg():

            def opener(m: tarfile.TarInfo = member) -> IO[bytes]:
                stream = archive.extractfile(m)
                assert stream is not None
                return stream

            entries.append(_Entry(path, "file", member.size, bool(member.mode & 0o111), opener=opener))
        else:
            raise UploadError(f"the entry {member.name!r} is a device file or FIFO; only files, folders and links")
    return entries


def unpack_upload(filename: str, content: bytes, dest: Path) -> list[str]:
    """Write the upload into the empty directory ``dest``; return the relative paths written.

    Args:
        filename: The name the author gave; decides between archive and single file.
        content: The uploaded bytes.
        dest: An existing empty directory.

    Raises:
        UploadError: the upload is empty, too large, malformed or unsafe.
    """
    if not content:
        raise UploadError("the upload is empty")
    if len(content) > MAX_UPLOAD_BYTES:
        raise UploadError(
            f"the upload is {len(content) / (1 << 20):.1f} MiB; the limit is {MAX_UPLOAD_BYTES >> 20} MiB "
            "(leave out build products and data the bot does not need)"
        )
    base = posixpath.basename(filename.replace("\\", "/")).strip()
    if not base or base in (".", ".."):
        raise UploadError(f"the file name {filename!r} is not usable; give the upload a plain file name")
    if not is_archive(base):
        target = dest / base
        target.write_bytes(content)
        target.chmod(0o755)
        return [base]
    if base.lower().endswith(".zip"):
        try:
            zipped = zipfile.ZipFile(io.BytesIO(content))
        except zipfile.BadZipFile as exc:
            raise UploadError(f"the upload is not a valid zip archive ({exc})") from None
        with zipped:
            return _corrupt_is_upload_error("zip", lambda: _write_entries(_zip_entries(zipped), dest))
    try:
        tarred = tarfile.TarFile.open(fileobj=io.BytesIO(content), mode="r:*")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise UploadError(f"the upload is not a valid tar archive ({exc})") from None
    with tarred:
        return _corrupt_is_upload_error("tar", lambda: _write_entries(_tar_entries(tarred), dest))


_CORRUPT = (zipfile.BadZipFile, zlib.error, tarfile.TarError, EOFError, NotImplementedError, RuntimeError, ValueError)
"""What the zip and tar readers raise on damaged or lying archives (and on encrypted zip entries)."""


def _corrupt_is_upload_error(kind: str, unpack: Callable[[], list[str]]) -> list[str]:
    try:
        return unpack()
    except UploadError:
        raise
    except _CORRUPT as exc:
        raise UploadError(
            f"the {kind} archive is damaged or its headers are wrong ({exc}); build it again with a standard tool"
        ) from None


def _write_entries(entries: list[_Entry], dest: Path) -> list[str]:
    if len(entries) > MAX_ENTRIES:
        raise UploadError(f"the archive has {len(entries)} entries; the limit is {MAX_ENTRIES}")
    declared = sum(e.size for e in entries)
    if declared > MAX_UNPACKED_BYTES:
        raise UploadError(
            f"the archive unpacks to {declared / (1 << 20):.1f} MiB; the limit is {MAX_UNPACKED_BYTES >> 20} MiB"
        )
    for entry in entries:
        if entry.kind == "symlink":
            _check_link(entry.path, entry.link)
    if not any(e.kind == "file" for e in entries):
        raise UploadError("the archive holds no files")
    written: list[str] = []
    total = 0
    root = dest.resolve()
    for entry in entries:
        if not entry.path:
            continue
        target = root / entry.path
        _check_parents(root, target, entry.path)
        if entry.kind == "dir":
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            raise UploadError(f"the archive holds {entry.path!r} twice")
        if entry.kind == "symlink":
            os.symlink(entry.link, target)
            written.append(entry.path)
            continue
        assert callable(entry.opener)
        written_here = 0
        with entry.opener() as source, open(target, "xb") as sink:
            while chunk := source.read(1 << 16):
                total += len(chunk)
                written_here += len(chunk)
                if total > MAX_UNPACKED_BYTES:
                    raise UploadError(f"the archive unpacks to more than {MAX_UNPACKED_BYTES >> 20} MiB")
                if written_here > entry.size:
                    raise UploadError(
                        f"the entry {entry.path!r} holds more than the {entry.size} bytes its header declares; "
                        "the archive is damaged or forged"
                    )
                sink.write(chunk)
        target.chmod(0o755 if entry.executable else 0o644)
        written.append(entry.path)
    for entry in entries:
        if entry.kind == "symlink":
            _check_resolved_link(root, entry)
    for folder, dirs, _files in os.walk(root):
        for d in dirs:
            path = Path(folder) / d
            if not path.is_symlink():
                path.chmod(0o755)
    root.chmod(0o755)
    return written


def _check_resolved_link(root: Path, entry: _Entry) -> None:
    """Refuse a link that leaves the upload once every link on its way is followed for real."""
    resolved = os.path.realpath(root / entry.path)
    if resolved != str(root) and not resolved.startswith(str(root) + os.sep):
        raise UploadError(
            f"the link {entry.path!r} (to {entry.link!r}) leads outside the upload once the links it goes "
            "through are followed; links must stay inside the upload"
        )


def _check_parents(root: Path, target: Path, name: str) -> None:
    """Refuse writing through a link created by an earlier entry."""
    current = target.parent
    while current != root:
        if current.is_symlink():
            raise UploadError(f"the entry {name!r} would be written through the link {current.relative_to(root)}")
        current = current.parent
