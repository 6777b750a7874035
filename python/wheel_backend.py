"""The build backend of the culprit-agent wheel (PEP 517), with nothing to install first.

`pip wheel ./python`, `pip install ./python` or `python3 -m build --no-isolation ./python`
call it. It builds the agent library from the C tree (this folder's parent in a checkout,
csrc/ in an sdist) with CMake in a temporary directory (CULPRIT_AGENT_ONLY: protobuf-c and
OpenSSL are all it needs), and writes a wheel holding the package and the library beside
it (culprit_agent/libculprit_agent.so.0, which _lib.py loads first). Nothing is written
into the source tree; the temporary directory is removed.
"""
import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "culprit_agent"
LIBRARY = "libculprit_agent.so.0"
# what the agent library is built from (an sdist carries these under csrc/)
C_PARTS = ("CMakeLists.txt", "cmake", "common", "schema", "diagnose", "agent")


def _c_tree():
    for root in (os.path.join(HERE, "csrc"), os.path.dirname(HERE)):
        if os.path.isfile(os.path.join(root, "agent", "agent.h")):
            return root
    raise RuntimeError(f"no C source of the agent library beside {HERE} (a checkout's parent folder, or csrc/)")


def _version():
    text = open(os.path.join(_c_tree(), "CMakeLists.txt")).read()
    m = re.search(r"project\(\s*culprit\s+VERSION\s+([0-9.]+)", text)
    if not m:
        raise RuntimeError("no version in CMakeLists.txt's project()")
    return m.group(1)


def _metadata():
    return (f"Metadata-Version: 2.1\nName: culprit-agent\nVersion: {_version()}\n"
            "Summary: Stream a training job's iteration and phase timings to culpritd\n"
            "Requires-Python: >=3.9\nProvides-Extra: torch\nRequires-Dist: torch>=1.13; extra == \"torch\"\n")


def _tag():
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def _build_library(tmp):
    """libculprit_agent built in tmp: its path."""
    build = os.path.join(tmp, "build")
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    subprocess.run(["cmake", "-S", _c_tree(), "-B", build, "-DCULPRIT_AGENT_ONLY=ON", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", build, "--target", "culprit_agent", "-j", jobs], check=True,
                   stdout=sys.stderr)
    return os.path.realpath(os.path.join(build, "agent", LIBRARY))


def _package_files():
    src = os.path.join(HERE, NAME)
    return sorted(f for f in os.listdir(src) if f.endswith(".py") and f != "_location.py")


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    dist_info = f"{NAME}-{version}.dist-info"
    name = f"{NAME}-{version}-{_tag()}.whl"
    with tempfile.TemporaryDirectory(prefix="culprit-wheel-") as tmp:
        files = [(f"{NAME}/{f}", open(os.path.join(HERE, NAME, f), "rb").read()) for f in _package_files()]
        files.append((f"{NAME}/{LIBRARY}", open(_build_library(tmp), "rb").read()))
        files.append((f"{dist_info}/METADATA", _metadata().encode()))
        files.append((f"{dist_info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: culprit wheel_backend\n"
                                             f"Root-Is-Purelib: false\nTag: {_tag()}\n").encode()))
        record = [_record_line(arc, data) for arc, data in files] + [f"{dist_info}/RECORD,,"]
        files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
        os.makedirs(wheel_directory, exist_ok=True)
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
            for arc, data in files:
                info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if arc.endswith(LIBRARY) else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
    return name


def _sdist_filter(info):
    """Leaves out bytecode and what cmake --install writes."""
    base = os.path.basename(info.name)
    return None if base in ("__pycache__", "_location.py") or base.endswith(".pyc") else info


def build_sdist(sdist_directory, config_settings=None):
    """The package with the C sources of the library under csrc/."""
    base = f"{NAME}-{_version()}"
    name = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for f in ("pyproject.toml", "wheel_backend.py", NAME):
            t.add(os.path.join(HERE, f), f"{base}/{f}", filter=_sdist_filter)
        for part in C_PARTS:
            t.add(os.path.join(_c_tree(), part), f"{base}/csrc/{part}", filter=_sdist_filter)
        data = _metadata().encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
