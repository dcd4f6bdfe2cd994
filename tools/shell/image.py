"""Building the sandbox image (`flarebot-sandbox:<version>`) that every shell container starts from.

Two ways, the same contents (Debian bookworm with `PACKAGES`, Bun from the npm registry,
a `sandbox` user of uid 1000 whose home is `/workspace`):

- from `sandbox/Dockerfile` when the engine can pull `debian:bookworm-slim` from a registry;
- otherwise from Debian packages: `debootstrap --variant=minbase` into a folder, then
  `docker import` of its tar. The mirror is the machine's own apt mirror (read from its
  apt sources), never a host written here. This needs root and `debootstrap`.

Bun comes from the npm package that ships its binary (`@oven/bun-linux-*`), checked
against the integrity hash pinned below; the registry is npm's own setting
(`npm_config_registry`, `npm config get registry`) or registry.npmjs.org.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tools.shell.engine import (
    SANDBOX_IMAGE,
    SANDBOX_REPOSITORY,
    SANDBOX_UID,
    SANDBOX_VERSION,
    WORKSPACE,
    engine_client,
    engine_where,
)

SUITE = "bookworm"
BASE_IMAGE = "debian:bookworm-slim"
PACKAGES = ("bash", "coreutils", "python3", "curl", "git", "jq", "nodejs", "ca-certificates")
BUN_VERSION = "1.4.5"
# npm package of Bun's binary per machine, with the `dist.integrity` the registry published.
BUN_PACKAGES = {
    "x86_64": (
        "@oven/bun-linux-x64-baseline",  # baseline: runs on CPUs without AVX2 too
        "sha512-s8yMwYcFnnrA178gji0gZbkE2WVDej/Ti1x770oPfihxyRxSMNhGhiAQNXV53aDeraZxksdvKV/RAdQBCd0qPA==",
    ),
    "aarch64": (
        "@oven/bun-linux-aarch64",
        "sha512-4BXmsSKnjOrlGWqZV4x/oWa7AVoR+B6lCXddMzOAXBIm3t50eslg9wb66gmtW1AamEQ1l1CDvmmruysEhqOWMg==",
    ),
}
NPM_REGISTRY = "https://registry.npmjs.org/"
DOCKERFILE = Path(__file__).parent / "sandbox" / "Dockerfile"
# Applied by `docker import` (the Dockerfile says the same).
IMPORT_CHANGES = [
    f"USER {SANDBOX_UID}:{SANDBOX_UID}",
    f"WORKDIR {WORKSPACE}",
    f"ENV HOME={WORKSPACE}",
    "ENV LANG=C.UTF-8",
    "ENV PATH=/usr/local/bin:/usr/bin:/bin",
]
# What `--check` runs in a fresh container of the image.
CHECK_COMMAND = (
    "set -e; id -u; bash --version | head -n 1; python3 --version; node --version; "
    "bun --version; git --version; jq --version; curl --version | head -n 1"
)

Say = Callable[[str], None]


class BuildFailed(Exception):
    """The sandbox image could not be built; the message says why and what to do."""


def sandbox_image_exists() -> bool:
    from docker.errors import DockerException, ImageNotFound  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    try:
        engine_client().images.get(SANDBOX_IMAGE)
    except ImageNotFound:
        return False
    except (DockerException, RequestException) as error:
        raise BuildFailed(f"No Docker engine answers at {engine_where()}: start one first.") from error
    return True


def sandbox_image_build(*, say: Say, method: str = "auto") -> str:
    """Build the sandbox image; return how ("dockerfile" or "debootstrap")."""
    from docker.errors import APIError, DockerException  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    client = engine_client()
    try:
        client.ping()
    except (DockerException, RequestException) as error:
        raise BuildFailed(f"No Docker engine answers at {engine_where()}: start one first.") from error
    bun = _bun_binary(say)
    if method in ("auto", "dockerfile"):
        try:
            say(f"pulling {BASE_IMAGE}")
            client.images.pull(BASE_IMAGE)
        except (APIError, RequestException) as error:
            if method == "dockerfile":
                raise BuildFailed(f"{BASE_IMAGE} cannot be pulled: {str(error)[:200]}") from error
            say("no registry answers: building from Debian packages with debootstrap instead")
        else:
            _build_from_dockerfile(bun, say)
            return "dockerfile"
    _build_with_debootstrap(bun, say)
    return "debootstrap"


def sandbox_image_check() -> str:
    """Run the image's tools once in a throwaway container; return what they printed."""
    output = engine_client().containers.run(
        SANDBOX_IMAGE,
        ["bash", "-c", CHECK_COMMAND],
        remove=True,
        network_mode="none",
        read_only=True,
        user=f"{SANDBOX_UID}:{SANDBOX_UID}",
        tmpfs={WORKSPACE: f"rw,exec,nosuid,nodev,size=16m,uid={SANDBOX_UID},gid={SANDBOX_UID}"},
        stderr=True,
    )
    return bytes(output).decode("utf-8", "replace")


def _build_from_dockerfile(bun: bytes, say: Say) -> None:
    from docker.errors import APIError, DockerException  # the Docker SDK loads on first use

    with tempfile.TemporaryDirectory(prefix="flarebot-sandbox-") as context:
        shutil.copy(DOCKERFILE, Path(context) / "Dockerfile")
        (Path(context) / "bun").write_bytes(bun)
        say(f"building {SANDBOX_IMAGE} from {DOCKERFILE.name}")
        try:
            engine_client().images.build(path=context, tag=SANDBOX_IMAGE, rm=True, pull=False)
        except (APIError, DockerException) as error:
            raise BuildFailed(f"docker build failed: {str(error)[:300]}") from error


def _build_with_debootstrap(bun: bytes, say: Say) -> None:
    from docker.errors import APIError, DockerException  # the Docker SDK loads on first use

    if os.geteuid() != 0:
        raise BuildFailed("Building from Debian packages needs root (debootstrap): run the command as root.")
    if shutil.which("debootstrap") is None:
        raise BuildFailed("debootstrap is missing: `apt-get install -y debootstrap`, then run the command again.")
    mirror = apt_mirror()
    with tempfile.TemporaryDirectory(prefix="flarebot-sandbox-") as scratch:
        root = Path(scratch) / "root"
        say(f"debootstrap {SUITE} from {mirror} (about a minute)")
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(root),
            mirror,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise BuildFailed(f"debootstrap failed: {' | '.join(tail)[:400]}")
        _finish_root(root, bun)
        archive = Path(scratch) / "root.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(archive), "."], check=True)
        say(f"importing {SANDBOX_IMAGE}")
        try:
            engine_client().api.import_image_from_file(
                str(archive), repository=SANDBOX_REPOSITORY, tag=SANDBOX_VERSION, changes=IMPORT_CHANGES
            )
        except (APIError, DockerException) as error:
            raise BuildFailed(f"docker import failed: {str(error)[:300]}") from error


def _finish_root(root: Path, bun: bytes) -> None:
    """Add Bun and the sandbox user; drop what only installing needed."""
    target = root / "usr/local/bin/bun"
    target.write_bytes(bun)
    target.chmod(0o755)
    with (root / "etc/passwd").open("a") as passwd:
        passwd.write(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{WORKSPACE}:/bin/bash\n")
    with (root / "etc/group").open("a") as group:
        group.write(f"sandbox:x:{SANDBOX_UID}:\n")
    (root / WORKSPACE.lstrip("/")).mkdir(mode=0o755, exist_ok=True)
    os.chown(root / WORKSPACE.lstrip("/"), SANDBOX_UID, SANDBOX_UID)
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
        folder = root / leftover
        if folder.is_dir():
            for entry in folder.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                elif entry.name != "lock":
                    entry.unlink(missing_ok=True)
    (root / "etc/flarebot-sandbox").write_text(
        f"{SANDBOX_IMAGE}: Debian {SUITE} with {' '.join(PACKAGES)}, bun {BUN_VERSION}\n"
    )


def apt_mirror(etc: Path = Path("/etc")) -> str:
    """The Debian mirror this machine's apt uses (deb822 `URIs`, else a `deb` line)."""
    sources = sorted((etc / "apt/sources.list.d").glob("*.sources"))
    for source in sources:
        for stanza in source.read_text().split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.+)$", stanza, flags=re.MULTILINE))
            suites = fields.get("Suites", "").split()
            if SUITE in suites and "URIs" in fields:
                return fields["URIs"].split()[0]
    listing = etc / "apt/sources.list"
    if listing.exists():
        for line in listing.read_text().splitlines():
            words = line.split()
            if len(words) >= 3 and words[0] == "deb" and SUITE in words[2:4] and "security" not in words[1]:
                return words[1]
    raise BuildFailed(f"No Debian {SUITE} mirror is configured in /etc/apt: add one to apt's sources first.")


def _npm_registry() -> str:
    # npm reads its settings from lowercase npm_config_* variables too.
    configured = os.environ.get("npm_config_registry") or os.environ.get("NPM_CONFIG_REGISTRY")  # noqa: SIM112
    if not configured and shutil.which("npm"):
        done = subprocess.run(["npm", "config", "get", "registry"], capture_output=True, text=True, check=False)
        configured = done.stdout.strip() if done.returncode == 0 else None
    registry = configured or NPM_REGISTRY
    return registry if registry.endswith("/") else registry + "/"


def _bun_binary(say: Say) -> bytes:
    """Bun's binary for this machine from its npm package, checked against the pinned hash."""
    machine = platform.machine()
    if machine not in BUN_PACKAGES:
        raise BuildFailed(f"Bun has no npm package for {machine} here.")
    package, integrity = BUN_PACKAGES[machine]
    short = package.rpartition("/")[2]
    url = f"{_npm_registry()}{package}/-/{short}-{BUN_VERSION}.tgz"
    say(f"fetching {package}@{BUN_VERSION}")
    if not url.startswith(("https://", "http://")):
        raise BuildFailed("The npm registry must be an http(s) URL.")
    try:
        with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 (scheme checked above)
            archive = response.read()
    except OSError as error:
        raise BuildFailed(f"Bun could not be fetched from the npm registry ({str(error)[:120]}).") from error
    algorithm, _, expected = integrity.partition("-")
    digest = base64.b64encode(hashlib.new(algorithm, archive).digest()).decode()
    if digest != expected:
        raise BuildFailed(f"{package}@{BUN_VERSION} does not match its pinned integrity hash; not used.")
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        member = tar.extractfile("package/bin/bun")
        if member is None:
            raise BuildFailed(f"{package}@{BUN_VERSION} holds no bin/bun.")
        return member.read()


def sandbox_image_describe() -> str:
    """A line about the installed image (id and size), for the command's output."""
    image = engine_client().images.get(SANDBOX_IMAGE)
    size = int(image.attrs.get("Size") or 0) // (1024 * 1024)
    return json.dumps({"image": SANDBOX_IMAGE, "id": image.short_id, "size_mib": size})
