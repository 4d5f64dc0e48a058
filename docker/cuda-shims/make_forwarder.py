"""Generate and build the CUDA shared libraries the GPU image's libmxnet.so needs but CUDA 11.8 lacks.

mxnet-cu110 1.9.1 was linked against CUDA 11.0. NVIDIA's CUDA 11.8 wheels provide every library it
needs under the same soname and symbol-version node, except two:

    libmxnet.so imports               CUDA 11.8 provides
    libcusolver.so.10 (node "libcusolver.so.10")   libcusolver.so.11 (node "libcusolver.so.11")
    libnvrtc.so.11.0  (node "libnvrtc.so.11.0")    libnvrtc.so.11.2  (node "libnvrtc.so.11.2")

A symlink does not work (the dynamic linker checks the version node), and `.symver` aliases fail to
link in GNU ld 2.40. `forwarder` builds a small library under the old soname that exports exactly the
functions libmxnet.so imports from it, under the old version node, each as a one-instruction
trampoline (`jmp *slot`). The slots are filled by a constructor with dlvsym(<new soname>, name, <new
node>); the new library is a DT_NEEDED of the forwarder, so ldd and the dynamic linker see the whole
chain. The symbol list comes from the consumer's dynamic symbol table at build time, never from a
hand-written list, and the build fails if the new library lacks any of them.

`stub` builds a libcuda.so.1 stand-in for build-time checks on machines without an NVIDIA driver: it
exports the functions the consumer imports from the driver (its unversioned undefined symbols that
none of its other DT_NEEDED libraries define), each returning CUDA_ERROR_STUB_LIBRARY (34). It never
goes into the final image: the driver's libcuda.so.1 comes from the host at run time.

usage:
  make_forwarder.py forwarder --consumer libmxnet.so --soname libcusolver.so.10 \
      --target /path/to/libcusolver.so.11 --out-dir DIR [--cc gcc]
  make_forwarder.py stub --consumer libmxnet.so --soname libcuda.so.1 --out-dir DIR [--cc gcc]
  make_forwarder.py imports --consumer libmxnet.so --soname libcusolver.so.10   (print the list only)

Needs nm and readelf (binutils) and a C compiler: it runs in the builder stage only.
"""

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CUDA_ERROR_STUB_LIBRARY = 34


@dataclass(frozen=True)
class DynSym:
    name: str
    version: str | None  # None: unversioned
    kind: str  # nm's type letter: U undefined, T text, W weak, i ifunc, D/B/R data, ...
    defined: bool
    weak: bool

    @property
    def function(self) -> bool:
        return self.kind in "TtWi"


def fail(message: str) -> None:
    sys.exit(f"make_forwarder: {message}")


def dynsyms(path: str) -> list[DynSym]:
    """The dynamic symbols of an ELF file with their versions, from `nm -D --with-symbol-versions`
    (readelf --dyn-syms gives the same but takes 10 s on libmxnet.so's 200,000 symbols)."""
    out = subprocess.run(["nm", "-D", "--with-symbol-versions", path], check=True, capture_output=True, text=True)
    syms = []
    for line in out.stdout.splitlines():
        fields = line.split()
        # "0000000000001200 T name@@VERSION" (defined) or "                 U name@VERSION" (undefined)
        if len(fields) == 2:
            kind, raw = fields
        elif len(fields) == 3:
            _value, kind, raw = fields
        else:
            continue
        name, sep, version = raw.partition("@")
        syms.append(DynSym(name, (version.lstrip("@") or None) if sep else None, kind,
                           defined=kind not in "Uwv", weak=kind in "wvWV"))
    return syms


def dynamic_tags(path: str) -> dict[str, list[str]]:
    """NEEDED, SONAME, RPATH and RUNPATH entries of an ELF file."""
    out = subprocess.run(["readelf", "-d", "--wide", path], check=True, capture_output=True, text=True).stdout
    tags: dict[str, list[str]] = {}
    for match in re.finditer(r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+[^\[]*\[(.*)\]", out):
        tags.setdefault(match.group(1), []).append(match.group(2))
    return tags


def version_definitions(path: str) -> list[str]:
    out = subprocess.run(["readelf", "-V", "--wide", path], check=True, capture_output=True, text=True).stdout
    section = out.split("Version definition section", 1)[-1].split("Version needs section", 1)[0]
    return re.findall(r"Name: (\S+)", section) if "Version definition section" in out else []


def soname_of(path: str) -> str:
    sonames = dynamic_tags(path).get("SONAME", [])
    if not sonames:
        fail(f"{path} has no DT_SONAME")
    return sonames[0]


def imports_from(consumer: str, version_node: str) -> list[DynSym]:
    """The undefined symbols the consumer binds to `version_node` (a library's version node)."""
    return sorted(
        (s for s in dynsyms(consumer) if not s.defined and s.version == version_node),
        key=lambda s: s.name,
    )


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def forwarder_source(soname: str, target_soname: str, target_node: str, names: list[str], consumer: str) -> str:
    count = len(names)
    trampolines = "".join(
        f'    "\\t.globl {name}\\n\\t.type {name}, @function\\n\\t.p2align 4\\n{name}:\\n"\n'
        f'    "\\tjmp *smmh_forward_slots+{8 * index}(%rip)\\n\\t.size {name}, .-{name}\\n"\n'
        for index, name in enumerate(names)
    )
    name_list = "".join(f"    {c_string(name)},\n" for name in names)
    return f"""\
/* GENERATED by docker/cuda-shims/make_forwarder.py from the dynamic symbols of {os.path.basename(consumer)}:
 * {soname} forwarding {count} functions to {target_soname} (version node {target_node}). Do not edit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const smmh_forward_names[{count}] = {{
{name_list}}};

/* One slot per function, filled in by the constructor below before any caller can run. */
__attribute__((visibility("hidden"))) void *smmh_forward_slots[{count}];

/* The exported functions: each jumps to its slot, leaving arguments and return address untouched. */
__asm__(
    "\\t.text\\n"
{trampolines});

__attribute__((constructor)) static void smmh_forward_init(void) {{
    /* Already loaded: it is this library's DT_NEEDED. dlopen only takes a handle (and a reference). */
    void *target = dlopen({c_string(target_soname)}, RTLD_NOW | RTLD_GLOBAL);
    if (!target) {{
        fprintf(stderr, "{soname}: cannot load {target_soname}: %s\\n", dlerror());
        abort();
    }}
    for (int i = 0; i < {count}; i++) {{
        smmh_forward_slots[i] = dlvsym(target, smmh_forward_names[i], {c_string(target_node)});
        if (!smmh_forward_slots[i]) {{
            fprintf(stderr, "{soname}: {target_soname} has no %s@{target_node}\\n", smmh_forward_names[i]);
            abort();
        }}
    }}
}}
"""


def version_script(node: str, names: list[str]) -> str:
    exported = "".join(f"    {name};\n" for name in names)
    return f"{node} {{\n  global:\n{exported}  local:\n    *;\n}};\n"


def compile_library(cc: str, out: Path, soname: str, source: str, extra: list[str]) -> None:
    src = out.with_suffix(out.suffix + ".c")
    src.write_text(source)
    cmd = [cc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(out), f"-Wl,-soname,{soname}",
           "-Wl,--no-undefined", str(src), *extra]
    print("make_forwarder:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def cmd_imports(args: argparse.Namespace) -> int:
    for sym in imports_from(args.consumer, args.soname):
        print(sym.name)
    return 0


def cmd_forwarder(args: argparse.Namespace) -> int:
    consumer, soname, target = args.consumer, args.soname, args.target
    if soname not in dynamic_tags(consumer).get("NEEDED", []):
        fail(f"{consumer} does not need {soname}: nothing to forward")
    wanted = imports_from(consumer, soname)
    if not wanted:
        fail(f"{consumer} imports no symbol with version node {soname}")
    target_soname = soname_of(target)
    nodes = version_definitions(target)
    if target_soname not in nodes:
        fail(f"{target} ({target_soname}) has no version node named after its soname; it defines {nodes}")
    target_node = target_soname
    # Only functions can be forwarded by a trampoline: an imported data symbol counts as missing.
    provided = {s.name for s in dynsyms(target) if s.defined and s.version == target_node and s.function}
    missing = [s.name for s in wanted if s.name not in provided]
    if missing:
        fail(f"{target_soname} lacks {len(missing)} function(s) {consumer} imports from {soname} "
             f"(as {target_node} functions): {', '.join(missing)}")

    names = [s.name for s in wanted]
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / soname
    vscript = out_dir / f"{soname}.map"
    vscript.write_text(version_script(soname, names))
    compile_library(args.cc, out, soname,
                    forwarder_source(soname, target_soname, target_node, names, consumer),
                    [f"-Wl,--version-script,{vscript}", "-Wl,--no-as-needed", target, "-Wl,--as-needed"])

    # The result must export every imported function under the old node and need the new library.
    exported = {s.name for s in dynsyms(str(out)) if s.defined and s.version == soname and s.function}
    if exported != set(names):
        fail(f"{out} exports {sorted(exported ^ set(names))} differently from what {consumer} imports")
    if target_soname not in dynamic_tags(str(out)).get("NEEDED", []):
        fail(f"{out} does not record DT_NEEDED {target_soname}")
    print(f"make_forwarder: {out}: {len(names)} functions@{soname} -> {target_soname}@{target_node}")
    return 0


def library_path(name: str, origin: str, rpaths: list[str], ld_cache: dict[str, str]) -> str | None:
    for entry in rpaths:
        for directory in entry.split(":"):
            candidate = os.path.join(directory.replace("$ORIGIN", origin).replace("${ORIGIN}", origin), name)
            if directory and os.path.exists(candidate):
                return candidate
    return ld_cache.get(name)


def ldconfig_cache() -> dict[str, str]:
    out = subprocess.run(["ldconfig", "-p"], check=True, capture_output=True, text=True).stdout
    cache: dict[str, str] = {}
    for match in re.finditer(r"^\s*(\S+) \((?:[^)]*x86-64[^)]*|libc6)\) => (\S+)$", out, re.MULTILINE):
        cache.setdefault(match.group(1), match.group(2))
    return cache


def cmd_stub(args: argparse.Namespace) -> int:
    consumer, soname = args.consumer, args.soname
    tags = dynamic_tags(consumer)
    if soname not in tags.get("NEEDED", []):
        fail(f"{consumer} does not need {soname}")
    # Unversioned, non-weak imports not defined by any of the consumer's other libraries.
    wanted = {s.name: s for s in dynsyms(consumer) if not s.defined and s.version is None and not s.weak}
    ld_cache = ldconfig_cache()
    origin = os.path.dirname(os.path.realpath(consumer))
    rpaths = tags.get("RPATH", []) + tags.get("RUNPATH", [])
    for needed in tags.get("NEEDED", []):
        if needed == soname:
            continue
        path = library_path(needed, origin, rpaths, ld_cache)
        if path is None:
            fail(f"cannot find {needed} (needed by {consumer}); register the CUDA library dirs first")
        for sym in dynsyms(path):
            if sym.defined:
                wanted.pop(sym.name, None)
    names = sorted(wanted)
    if not names:
        fail(f"{consumer} imports nothing from {soname}")
    strays = [n for n in names if not re.match(r"cu[A-Z]", n)]
    if strays:
        fail(f"unresolved imports of {consumer} that are not CUDA driver functions: {', '.join(strays)}")
    source = (
        f"/* GENERATED by docker/cuda-shims/make_forwarder.py: build-time stand-in for {soname} with the\n"
        f" * {len(names)} driver functions {os.path.basename(consumer)} imports. Every one returns\n"
        f" * CUDA_ERROR_STUB_LIBRARY. Never part of the final image. */\n"
        + "".join(f"int {name}(void) {{ return {CUDA_ERROR_STUB_LIBRARY}; }}\n" for name in names)
    )
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    compile_library(args.cc, out_dir / soname, soname, source, [])
    print(f"make_forwarder: {out_dir / soname}: stub with {len(names)} functions: {' '.join(names)}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("forwarder", "stub", "imports"):
        p = sub.add_parser(name)
        p.add_argument("--consumer", required=True, help="the library whose imports are served (libmxnet.so)")
        p.add_argument("--soname", required=True, help="soname (and version node) of the library to build")
        if name == "forwarder":
            p.add_argument("--target", required=True, help="path of the library to forward to")
        if name != "imports":
            p.add_argument("--out-dir", required=True)
            p.add_argument("--cc", default=os.environ.get("CC", "cc"))
    args = parser.parse_args(argv)
    return {"forwarder": cmd_forwarder, "stub": cmd_stub, "imports": cmd_imports}[args.command](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
