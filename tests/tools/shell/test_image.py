"""`build_sandbox_image`: where its Debian packages come from, and an image that is already there.

Building the image itself needs the Debian mirror and the npm registry, which tests may
not reach; `scripts/ensure-docker.sh` builds it before the suite, and every shell test
then runs in it.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tools.shell.engine import SANDBOX_IMAGE
from tools.shell.image import BuildFailed, apt_mirror

pytestmark = pytest.mark.django_db(transaction=True)

DEB822 = """Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
# a comment
URIs: http://mirror.example/debian http://other.example/debian
Suites: bookworm bookworm-updates
Components: main
"""


def etc_with(tmp_path: Path, *, sources: str | None = None, listing: str | None = None) -> Path:
    (tmp_path / "apt/sources.list.d").mkdir(parents=True)
    if sources is not None:
        (tmp_path / "apt/sources.list.d/debian.sources").write_text(sources)
    if listing is not None:
        (tmp_path / "apt/sources.list").write_text(listing)
    return tmp_path


def test_it_takes_the_mirror_from_the_machines_deb822_sources(tmp_path):
    assert apt_mirror(etc_with(tmp_path, sources=DEB822)) == "http://mirror.example/debian"


def test_it_falls_back_to_a_deb_line_of_sources_list(tmp_path):
    listing = (
        "deb http://sec.example/debian-security bookworm-security main\ndeb http://m.example/debian bookworm main\n"
    )

    assert apt_mirror(etc_with(tmp_path, listing=listing)) == "http://m.example/debian"


def test_it_says_so_when_no_mirror_is_configured(tmp_path):
    with pytest.raises(BuildFailed, match="No Debian bookworm mirror is configured"):
        apt_mirror(etc_with(tmp_path))


def test_it_leaves_an_image_that_is_already_there_alone():
    out = StringIO()

    call_command("build_sandbox_image", stdout=out)

    assert out.getvalue() == f"{SANDBOX_IMAGE} is already there (--force builds it again).\n"
