"""A real Docker engine for the tests, and images made on this machine.

The suite starts its own ``dockerd`` (root, no systemd) with its data, state and socket under a
temporary folder, and stops it at the end. No image registry is reachable, so the test images
are tarballs of this machine's Python loaded with ``docker import``:

- ``e31-test:full``: Python with papermill, ipykernel, nbconvert and cloudpickle (only those and
  what they need, copied from this interpreter's site-packages), the shared libraries they load;
- ``e31-test:bare``: the same Python without any of those packages.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path

FULL_IMAGE = "e31-test:full"
BARE_IMAGE = "e31-test:bare"
JOB_PACKAGES = ("papermill", "ipykernel", "nbconvert", "cloudpickle")
STDLIB_LEFT_OUT = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}
STDLIB_LEFT_OUT.add(f"config-{sysconfig.get_python_version()}-{sys.implementation._multiarch}")  # libpython.a
LEFT_OUT = re.compile(r"_tkinter\.|\.opt-[12]\.pyc$")  # Tk's X11 libraries; optimised bytecode


def why_no_docker() -> str | None:
    """Why these tests cannot start an engine here (None when they can)."""
    if shutil.which("dockerd") is None:
        return "no dockerd: install the packages in scripts/system-packages/docker.txt"
    if os.geteuid() != 0:
        return "starting dockerd needs root"
    return None


class DockerEngine:
    """``dockerd`` on its own socket, with its data and state under ``root``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.host = f"unix://{self.root / 'docker.sock'}"
        self.log_path = self.root / "dockerd.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> DockerEngine:
        import docker

        config = self.root / "daemon.json"  # not the machine's /etc/docker/daemon.json
        config.write_text("{}")
        command = [
            "dockerd", f"--config-file={config}", f"--host={self.host}", f"--data-root={self.root / 'data'}",
            f"--exec-root={self.root / 'exec'}", f"--pidfile={self.root / 'dockerd.pid'}",
            "--iptables=false", "--ip6tables=false", "--ip-masq=false", "--bridge=none",
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited early: {self.log_path.read_text()[-2000:]}")
            try:
                self.client = docker.DockerClient(base_url=self.host)
                return self
            except docker.errors.DockerException:
                time.sleep(0.1)
        raise TimeoutError(f"dockerd did not answer within {timeout}s; see {self.log_path}")

    def job_containers(self, job_id: str) -> list:
        return self.client.containers.list(all=True, filters={"label": f"e31.job={job_id}"}, ignore_removed=True)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for container in self.client.containers.list(all=True):
            container.remove(force=True)
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.root / "data", ignore_errors=True)  # image layers: hundreds of MB


def build_test_images(engine: DockerEngine, workdir: Path) -> None:
    """Import ``e31-test:bare`` and ``e31-test:full`` into ``engine``."""
    bare = python_files()
    full = bare + package_files(JOB_PACKAGES)
    bin_dir = Path(sys.executable).parent
    changes = [f"ENV PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin", "ENV LANG=C.UTF-8"]
    for name, files in ((BARE_IMAGE, bare), (FULL_IMAGE, full)):
        tarball = workdir / f"{name.replace(':', '-')}.tar"
        write_root_tarball(tarball, files + shared_libraries(files))
        repository, tag = name.split(":")
        engine.client.api.import_image(src=str(tarball), repository=repository, tag=tag, changes=changes)
        tarball.unlink()


def python_files() -> list[Path]:
    """This interpreter without its site-packages: the executable, libpython, the stdlib."""
    prefix = Path(sys.base_prefix)
    executable = Path(sys.executable)
    files = [executable, *_links_to(executable)]
    libpython = sysconfig.get_config_var("INSTSONAME")
    if libpython and (prefix / "lib" / libpython).exists():
        files.append(prefix / "lib" / libpython)
    stdlib = Path(sysconfig.get_path("stdlib"))
    for path in stdlib.iterdir():
        if path.name not in STDLIB_LEFT_OUT:
            files.extend(_tree(path))
    return files + [Path("/bin/sh")]


def package_files(names) -> list[Path]:
    """The installed files of ``names`` and of everything they require."""
    files = []
    for dist in _requirement_closure(names):
        files.extend(p for p in (Path(dist.locate_file(f)) for f in dist.files or []) if p.is_file())
    return files


def _requirement_closure(names) -> list[importlib.metadata.Distribution]:
    from packaging.requirements import Requirement

    found: dict[str, importlib.metadata.Distribution] = {}
    done: set[tuple[str, str]] = set()
    todo = [(name, "") for name in names]  # (distribution, extra)
    while todo:
        name, extra = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (key, extra) in done:
            continue
        done.add((key, extra))
        try:
            found[key] = dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional dependency that is not installed
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                todo += [(requirement.name, e) for e in ("", *requirement.extras)]
    return list(found.values())


def shared_libraries(files: list[Path]) -> list[Path]:
    """The system libraries that the executables and extension modules among ``files`` load,
    with glibc's own helpers (pthread_cancel loads libgcc_s at run time)."""
    binaries = [str(f) for f in files if f.suffix == ".so" or ".so." in f.name or os.access(f, os.X_OK)]
    libraries: set[str] = set()
    for start in range(0, len(binaries), 200):
        result = subprocess.run(["ldd", *binaries[start : start + 200]], capture_output=True, text=True)
        libraries.update(re.findall(r"(/\S+\.so[.\d]*) \(0x", result.stdout))
    extra = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    libraries.update(re.findall(r"=> (/\S*/libgcc_s\.so\.1)$", extra, re.MULTILINE)[:1])
    prefix = str(Path(sys.base_prefix))
    return sorted(Path(p) for p in libraries if not p.startswith(prefix))


def write_root_tarball(target: Path, files: list[Path]) -> None:
    """A tarball of ``files`` at their own paths (links followed), readable by any uid."""
    directories: set[str] = set()

    def add_parents(tar: tarfile.TarFile, path: Path) -> None:
        for parent in reversed(path.parents[:-1]):
            if str(parent) not in directories:
                directories.add(str(parent))
                info = tarfile.TarInfo(str(parent).lstrip("/"))
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)

    with tarfile.open(target, "w") as tar:
        for path in dict.fromkeys(Path(os.path.normpath(f)) for f in files):
            add_parents(tar, path)
            info = tar.gettarinfo(os.path.realpath(path), arcname=str(path).lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode |= 0o444 | (0o111 if info.mode & 0o100 else 0)
            with open(path, "rb") as content:
                tar.addfile(info, content)
        info = tarfile.TarInfo("tmp")
        info.type, info.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(info)


def _tree(path: Path) -> list[Path]:
    paths = [path] if path.is_file() else path.rglob("*")
    return [p for p in paths if p.is_file() and not LEFT_OUT.search(p.name)]


def _links_to(executable: Path) -> list[Path]:
    """Names in the executable's folder that point at it (python3, python)."""
    return [p for p in executable.parent.iterdir() if p.is_symlink() and p.resolve() == executable.resolve()]
