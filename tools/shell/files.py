"""Files across the sandbox's wall: the conversation's attachments in, `/workspace/out/` back.

In: the attachments are written into the created (not started) container with the
engine's archive API (`put_archive`), into an anonymous volume mounted at
`/workspace/attachments` that goes with the container. No host path is ever bound:
the daemon unpacks a tar we build from the blobs' contents. Each file is mode 0444 and
owned by root, and so is the directory (the volume's root, which the engine makes 0755
whatever an archive says), so the sandbox user (uid 1000, no capabilities) can read
them and change none; the rest of `/workspace` stays its own. Names are
derived from the attachment's name (`sandbox_names`): never a path, no control
characters, at most `NAME_BYTES` bytes of UTF-8, de-duplicated.

Back: when the command ended by itself, the regular files at the top of
`/workspace/out/` are listed and read with `exec` inside the still running container
(`/workspace` is a tmpfs, which the archive API cannot read). The first ones by name
are taken while there are at most `OUT_FILES_MAX` of them and `OUT_BYTES_MAX` bytes in
all; the others are named in `Returned.notes` with the reason. Everything the sandbox
says is untrusted: the listing and the tar stream are read bounded, and only regular
file entries with a listed name and size are kept (a symlink, device, directory or
hard link comes back as nothing).
"""

from __future__ import annotations

import io
import logging
import tarfile
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tools.shell.attach import STDOUT, Frames, exec_attach
from tools.shell.engine import WORKSPACE

logger = logging.getLogger(__name__)

ATTACHMENTS_DIR = f"{WORKSPACE}/attachments"
OUT_DIR = f"{WORKSPACE}/out"
OUT_FILES_MAX = 10
OUT_BYTES_MAX = 20 * 1024 * 1024  # bytes of all returned files together
IN_BYTES_MAX = 100 * 1024 * 1024  # bytes of attachments copied into one sandbox
NAME_BYTES = 200  # bytes of UTF-8 in a file name inside the sandbox
LISTING_MAX = 256 * 1024  # bytes of the out/ listing read
TAR_OVERHEAD = 64 * 1024  # headers (long names included) and padding around the files
READ_TIMEOUT = 10.0  # seconds one read of an exec stream may wait


@dataclass(frozen=True)
class SandboxInput:
    """One attachment to copy in: its name inside the sandbox and its blob on the host."""

    name: str
    path: Path
    size: int


@dataclass
class Returned:
    """What came back from `/workspace/out/`: (name, bytes) in name order, and why others did not."""

    files: list[tuple[str, bytes]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def sandbox_name(raw: str) -> str:
    """Return a file name safe inside the sandbox: no path, no control characters, bounded bytes."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp", "Cs")).strip()
    if name.strip(".") == "":
        name = "attachment"
    if len(name.encode("utf-8")) > NAME_BYTES:
        stem, dot, extension = name.rpartition(".")
        keep = extension if dot and 0 < len(extension.encode("utf-8")) <= 16 else ""
        room = NAME_BYTES - (len(keep.encode("utf-8")) + 1 if keep else 0)
        base = (stem if keep else name).encode("utf-8")[:room].decode("utf-8", "ignore")
        name = f"{base}.{keep}" if keep else base
    return name


def sandbox_names(raw_names: list[str]) -> list[str]:
    """Return one safe, distinct name per attachment (a repeated name gets " (2)", " (3)"... before its extension)."""
    taken: set[str] = set()
    names = []
    for raw in raw_names:
        name = sandbox_name(raw)
        stem, dot, extension = name.rpartition(".")
        if not (dot and stem):
            stem, dot, extension = name, "", ""
        number = 1
        while name in taken:
            number += 1
            suffix = f" ({number}){dot}{extension}"
            name = stem.encode("utf-8")[: NAME_BYTES - len(suffix.encode("utf-8"))].decode("utf-8", "ignore") + suffix
        taken.add(name)
        names.append(name)
    return names


def inputs_archive(inputs: list[SandboxInput]) -> IO[bytes]:
    """Return a tar (in a temporary file, rewound) of the inputs: root-owned files, mode 0444."""
    archive = tempfile.TemporaryFile()  # noqa: SIM115 (handed to the engine, closed by the caller)
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for item in inputs:
            info = tarfile.TarInfo(item.name)
            info.size = item.size
            info.mode = 0o444
            try:
                blob = open(item.path, "rb")  # noqa: SIM115 (closed below)
            except FileNotFoundError:
                continue  # its conversation was just cleared: nothing to copy
            with blob:
                tar.addfile(info, blob)
    archive.seek(0)
    return archive


def copy_in(api: Any, container: str, inputs: list[SandboxInput]) -> None:
    """Write the inputs into the created container's attachments volume; raises DockerException."""
    with inputs_archive(inputs) as archive:
        api.put_archive(container, ATTACHMENTS_DIR, archive)


def _exec_output(api: Any, container: str, command: list[str], user: str, cap: int) -> bytes | None:
    """Run a command in the container and return its stdout, or None when it passed `cap` bytes."""
    exec_id = api.exec_create(container, command, stdout=True, stderr=False, user=user)["Id"]
    attached = exec_attach(api, exec_id)
    frames = Frames()
    kept = bytearray()
    try:
        attached.sock.settimeout(READ_TIMEOUT)
        chunk = attached.early
        while True:
            for stream, payload in frames.feed(chunk):
                if stream == STDOUT:
                    kept += payload
            if len(kept) > cap:
                return None
            chunk = attached.sock.recv(65536)
            if not chunk:
                break
    finally:
        attached.close()
    return bytes(kept)


def collect_out(api: Any, container: str, user: str) -> Returned:
    """Read the regular files of `/workspace/out/` from the running container, within the limits."""
    from docker.errors import DockerException  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    returned = Returned()
    try:
        _read_out(api, container, user, returned)
    except (DockerException, RequestException, OSError) as error:
        logger.warning("reading /workspace/out of %s failed: %s", container, str(error)[:300])
        returned.notes.append("The files of /workspace/out could not be read.")
    return returned


def _read_out(api: Any, container: str, user: str, returned: Returned) -> None:
    """List `/workspace/out/`, choose what may come back and unpack it into `returned`; raises the engine's errors."""
    listing = _exec_output(
        api,
        container,
        ["find", OUT_DIR, "-mindepth", "1", "-maxdepth", "1", "-printf", r"%y/%s/%f\0"],
        user,
        LISTING_MAX,
    )
    if listing is None:
        returned.notes.append("/workspace/out holds too many entries to list; none were returned.")
        return
    chosen = _choose(listing, returned)
    if not chosen:
        return
    expected = sum(chosen.values())
    data = _exec_output(
        api,
        container,
        ["tar", "-C", OUT_DIR, "-cf", "-", "--", *chosen],
        user,
        expected + TAR_OVERHEAD * len(chosen),
    )
    if data is None:
        returned.notes.append("The files of /workspace/out changed while they were read; none were returned.")
        return
    returned.files = _unpack(data, chosen, returned)


def _choose(listing: bytes, returned: Returned) -> dict[str, int]:
    """Pick, in name order, the regular files within the limits; note every other entry."""
    entries: list[tuple[str, str, int]] = []
    for record in listing.split(b"\0"):
        kind, _, rest = record.partition(b"/")
        size_text, _, raw_name = rest.partition(b"/")
        if not record or not raw_name:
            continue
        try:
            name = raw_name.decode("utf-8")
            size = int(size_text)
        except ValueError:
            returned.notes.append("A file whose name is not UTF-8 was not returned.")
            continue
        entries.append((name, kind.decode("ascii", "replace"), size))
    chosen: dict[str, int] = {}
    total = 0
    for name, kind_letter, size in sorted(entries):
        shown = sandbox_name(name)
        if kind_letter != "f":
            returned.notes.append(f"{shown}: not returned, only regular files are (this is a {_kind(kind_letter)}).")
        elif len(chosen) >= OUT_FILES_MAX:
            returned.notes.append(f"{shown}: not returned, at most {OUT_FILES_MAX} files come back.")
        elif total + size > OUT_BYTES_MAX:
            returned.notes.append(
                f"{shown}: not returned, the files coming back may be {OUT_BYTES_MAX // (1024 * 1024)} MB in all."
            )
        else:
            chosen[name] = size
            total += size
    return chosen


def _kind(kind: str) -> str:
    return {"d": "directory", "l": "symbolic link"}.get(kind, "special file")


def _unpack(data: bytes, chosen: dict[str, int], returned: Returned) -> list[tuple[str, bytes]]:
    """Keep the regular file entries named and sized as listed; anything else is dropped."""
    files: list[tuple[str, bytes]] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                name = member.name.removeprefix("./")
                if not member.isreg() or chosen.get(name) != member.size or any(n == name for n, _ in files):
                    continue
                extracted = tar.extractfile(member)
                if extracted is not None:
                    files.append((name, extracted.read(member.size)))
    except (tarfile.TarError, EOFError):
        returned.notes.append("The files of /workspace/out could not be read.")
        return []
    for name in chosen:
        if all(n != name for n, _ in files):
            returned.notes.append(f"{sandbox_name(name)}: not returned, it changed while it was read.")
    return sorted(files)
