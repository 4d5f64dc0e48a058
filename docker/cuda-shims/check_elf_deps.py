"""Build-time check: every ELF file under the given directories resolves all its DT_NEEDED libraries.

Run by the gpu stage of docker/Dockerfile, in the final filesystem, through the real dynamic linker
(ldd, so RPATH/RUNPATH, /etc/ld.so.cache and symbol-version nodes count exactly as at run time).
Fails (exit 1) on any library that is not found, except the --allow-missing ones (libcuda.so.1: the
NVIDIA container runtime mounts the host driver's), and on any missing symbol-version node (for
example a forwarder that does not define the node libmxnet.so imports). Also fails if a file named
like an allowed-missing library exists anywhere on the dynamic linker's path.

Two cases are not failures, by how they are loaded:
  - a library bundled by auditwheel in a wheel's private dir (numpy.libs/, ...) needing a sibling
    from the same dir: it is only ever loaded by its package's extension modules, whose RPATH names
    that dir; those modules are checked here too, with their whole dependency tree;
  - files matching --skip GLOB, for alternatives a package picks at run time (mpi4py's MPI.mpich
    module, for MPICH-ABI libraries; this image has Open MPI, which uses MPI.openmpi).

usage: check_elf_deps.py [--allow-missing SONAME]... [--skip GLOB]... DIR...
"""

import argparse
import fnmatch
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ELF_MAGIC = b"\x7fELF"
ET_EXEC, ET_DYN = 2, 3


def elf_files(roots: list[str]) -> list[str]:
    """Regular (non-symlink) ELF executables and shared objects under roots, each once."""
    found: set[str] = set()
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(dirpath, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as f:
                    header = f.read(18)
                if header[:4] == ELF_MAGIC and int.from_bytes(header[16:18], "little") in (ET_EXEC, ET_DYN):
                    found.add(path)
    return sorted(found)


def ldd_problems(path: str, allowed: set[str]) -> tuple[list[str], set[str]]:
    """(problems, allowed sonames that were missing) for one file."""
    proc = subprocess.run(["ldd", path], capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    if "not a dynamic executable" in output or "statically linked" in output:
        return [], set()
    problems, tolerated = [], set()
    for line in output.splitlines():
        missing = re.match(r"\s*(\S+) => not found", line)
        if missing and os.path.isfile(os.path.join(os.path.dirname(path), missing.group(1))):
            continue  # an auditwheel sibling: see the module docstring
        if missing:
            if missing.group(1) in allowed:
                tolerated.add(missing.group(1))
            else:
                problems.append(f"{missing.group(1)} not found")
        elif "not found" in line:
            # e.g. "version `libcusolver.so.10' not found (required by .../libmxnet.so)"
            problems.append(line.strip())
    if proc.returncode != 0 and not problems and not tolerated:
        problems.append(f"ldd exit {proc.returncode}: {output.strip()[:300]}")
    return problems, tolerated


def ld_path_dirs() -> list[str]:
    out = subprocess.run(["ldconfig", "-v", "-N", "-X"], capture_output=True, text=True).stdout
    return [line.split(":", 1)[0] for line in out.splitlines() if line and not line[0].isspace()]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--allow-missing", action="append", default=[], metavar="SONAME")
    parser.add_argument("--skip", action="append", default=[], metavar="GLOB")
    parser.add_argument("dirs", nargs="+")
    args = parser.parse_args(argv)
    allowed = set(args.allow_missing)

    files = elf_files(args.dirs)
    skipped = [f for f in files if any(fnmatch.fnmatch(f, glob) for glob in args.skip)]
    files = [f for f in files if f not in skipped]
    if not files:
        print(f"check_elf_deps: no ELF files under {' '.join(args.dirs)}", file=sys.stderr)
        return 1
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda p: ldd_problems(p, allowed), files))

    failed = 0
    needs_allowed: dict[str, int] = {}
    for path, (problems, tolerated) in zip(files, results):
        for soname in tolerated:
            needs_allowed[soname] = needs_allowed.get(soname, 0) + 1
        if problems:
            failed += 1
            print(f"check_elf_deps: {path}:", file=sys.stderr)
            for problem in problems:
                print(f"    {problem}", file=sys.stderr)

    # The allowed-missing libraries must really be absent: none on the linker path, none in the cache.
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    for soname in sorted(allowed):
        stem = soname.split(".so", 1)[0] + ".so"
        present = [d for d in ld_path_dirs() if os.path.isdir(d) and any(n.startswith(stem) for n in os.listdir(d))]
        if present or re.search(rf"^\s*{re.escape(stem)}\b", cache, re.MULTILINE):
            failed += 1
            print(f"check_elf_deps: {stem}* must not be on the linker path (found in {present or 'ld.so.cache'})",
                  file=sys.stderr)

    summary = ", ".join(f"{n} need {s} (allowed missing)" for s, n in sorted(needs_allowed.items())) or "none"
    print(f"check_elf_deps: {len(files)} ELF files under {' '.join(args.dirs)} ({len(skipped)} skipped); "
          f"{failed} with problems; {summary}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
