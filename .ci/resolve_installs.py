"""Does `pip install nsfleet` resolve to wheels only on every Python and platform the project
claims? CPython 3.11, 3.12 and 3.13 on Linux (manylinux, glibc 2.28+) x86_64 and aarch64 and on
macOS x86_64 and arm64: for each, pip resolves nsfleet's wheel with --dry-run --only-binary=:all:
for that interpreter and platform (nothing is installed or built), in parallel.

pip evaluates environment markers against the interpreter running it, not the target, so every
resolved package's Requires-Dist is evaluated here again for the target (packaging's markers);
a requirement the target needs that pip left out is added to the resolve explicitly and the
target resolved again. Needs PyPI (CI has it). Exit 0 when every target resolves.

    python3 .ci/resolve_installs.py [--wheel dist/nsfleet-*.whl] [--python 3.13]
                                    [--target linux-aarch64]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # a bare interpreter: pip's own copy
    from pip._vendor.packaging.markers import default_environment  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ("3.11", "3.12", "3.13")


def _manylinux(arch: str) -> list[str]:
    # pip does not widen a PEP 600 tag to the older ones a glibc 2.28 system also runs.
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(28, 16, -1)]
    return [*tags, f"manylinux2014_{arch}"]


# target -> (pip --platform tags, the marker variables of such a machine)
TARGETS: dict[str, tuple[list[str], dict[str, str]]] = {
    "linux-x86_64": (_manylinux("x86_64"), {"sys_platform": "linux", "platform_system": "Linux",
                                            "platform_machine": "x86_64", "os_name": "posix"}),
    "linux-aarch64": (_manylinux("aarch64"), {"sys_platform": "linux",
                                              "platform_system": "Linux",
                                              "platform_machine": "aarch64", "os_name": "posix"}),
    # pip widens a macOS tag to every older macOS version and universal2 itself.
    "macos-x86_64": (["macosx_13_0_x86_64"], {"sys_platform": "darwin",
                                              "platform_system": "Darwin",
                                              "platform_machine": "x86_64", "os_name": "posix"}),
    "macos-arm64": (["macosx_14_0_arm64"], {"sys_platform": "darwin",
                                            "platform_system": "Darwin",
                                            "platform_machine": "arm64", "os_name": "posix"}),
}


def marker_env(python: str, target: str) -> dict[str, str]:
    env = dict(default_environment())
    env.update(TARGETS[target][1], python_version=python, python_full_version=f"{python}.0",
               implementation_name="cpython", platform_python_implementation="CPython",
               platform_release="", platform_version="")
    return env


def missing_requirements(report: dict[str, object], env: dict[str, str],
                         root_extras: dict[str, set[str]]) -> list[str]:
    """Requirements the target needs, by its own markers, that the resolution lacks."""
    installed = {canonicalize_name(item["metadata"]["name"]): item["metadata"]  # type: ignore
                 for item in report["install"]}  # type: ignore[index, union-attr]
    extras = {name: set(e) for name, e in root_extras.items()}
    needed: dict[str, Requirement] = {}
    changed = True
    while changed:  # extras asked for by one package change what another requires
        changed = False
        for name, meta in installed.items():
            for line in meta.get("requires_dist", []):
                req = Requirement(line)
                asked = extras.get(name, set()) | {""}
                if req.marker is not None and not any(
                        req.marker.evaluate({**env, "extra": e}) for e in asked):
                    continue
                dep = canonicalize_name(req.name)
                if not set(req.extras) <= extras.setdefault(dep, set()):
                    extras[dep] |= set(req.extras)
                    changed = True
                needed.setdefault(dep, req)
    out = []
    for dep, req in needed.items():
        if dep not in installed:
            bare = Requirement(str(req))
            bare.marker = None
            out.append(str(bare))
    return sorted(out)


def resolve(wheel: Path, python: str, target: str) -> tuple[bool, str]:
    platforms, _ = TARGETS[target]
    env = marker_env(python, target)
    extra_reqs: list[str] = []
    for _attempt in range(4):
        with tempfile.TemporaryDirectory() as tmp:
            report_path = Path(tmp) / "report.json"
            cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                   "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
                   "--python-version", python, "--implementation", "cp",
                   "--abi", f"cp{python.replace('.', '')}", "--abi", "abi3", "--abi", "none",
                   *[arg for p in platforms for arg in ("--platform", p)],
                   "--target", str(Path(tmp) / "target"), "--report", str(report_path),
                   str(wheel), *extra_reqs]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                errors = [line for line in done.stderr.splitlines()
                          if not line.startswith("WARNING: Location")]
                return False, "\n".join(errors[-15:])
            report = json.loads(report_path.read_text())
        missing = missing_requirements(report, env, {"nsfleet": set()})
        if not missing:
            names = sorted(f"{i['metadata']['name']}=={i['metadata']['version']}"
                           for i in report["install"])
            not_wheels = [i["download_info"]["url"] for i in report["install"]
                          if not i["download_info"]["url"].endswith(".whl")]
            if not_wheels:
                return False, f"not wheels: {not_wheels}"
            return True, f"{len(names)} wheels"
        extra_reqs = sorted(set(extra_reqs) | set(missing))
    return False, f"markers for this target keep asking for more: {extra_reqs}"


def build_wheel(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "-w", str(out), str(ROOT)], check=True)
    return next(out.glob("nsfleet-*.whl"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help="nsfleet's wheel (default: built here)")
    parser.add_argument("--python", action="append", choices=PYTHONS)
    parser.add_argument("--target", action="append", choices=sorted(TARGETS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or build_wheel(Path(tmp))
        jobs = [(py, t) for py in args.python or PYTHONS for t in args.target or TARGETS]
        with ThreadPoolExecutor(max_workers=6) as pool:
            results = list(pool.map(lambda job: (job, resolve(wheel, *job)), jobs))
    failed = 0
    for (python, target), (ok, detail) in results:
        print(f"{'ok  ' if ok else 'FAIL'} CPython {python} {target}: {detail}")
        failed += not ok
    print(f"install resolve: {len(results) - failed} targets resolved to wheels, {failed} not")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
