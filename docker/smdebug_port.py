"""Port an unpacked smdebug wheel to this image's Python stack (docker/install-smdebug.sh).

usage: smdebug_port.py UNPACKED_WHEEL_DIR

1. Every generated *_pb2.py module is rewritten from its own serialized descriptor into the form current protoc
   writes (a descriptor pool and protobuf's builder): smdebug 1.0.34's modules were made by protoc 3.x, and protobuf
   >= 4 refuses to load them ("Descriptors cannot be created directly"). The descriptors, and so the messages and
   the files smdebug writes, are unchanged.
2. The wheel's requirements on those two packages become what was checked here: protobuf >= 3.20 (the builder
   API) and pyinstrument >= 4 (the Profiler and JSONRenderer smdebug's Python profiler uses).

Fails when the wheel is not the one this was written for: no pb2 module, a module without a serialized descriptor,
or requirements that differ from the expected ones.
"""

import ast
import sys
from pathlib import Path

PB2_TEMPLATE = '''\
# Rewritten from this module's own serialized descriptor by sagemaker-mxnet-horovod's docker/smdebug_port.py:
# smdebug ships modules made by protoc 3.x, which protobuf >= 4 refuses to load. The descriptor is unchanged.
from google.protobuf import descriptor_pool as _descriptor_pool
from google.protobuf import symbol_database as _symbol_database
from google.protobuf.internal import builder as _builder

_sym_db = _symbol_database.Default()
{imports}
DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile({serialized!r})
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, globals())
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, {module!r}, globals())
'''
REQUIREMENTS = {
    "Requires-Dist: protobuf (<=3.20.3,>=3.20.0)": "Requires-Dist: protobuf (>=3.20.0)",
    "Requires-Dist: pyinstrument (==3.4.2)": "Requires-Dist: pyinstrument (>=4)",
}


def serialized_descriptor(tree: ast.Module, path: Path) -> bytes:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "FileDescriptor":
            for keyword in node.keywords:
                if keyword.arg == "serialized_pb":
                    return ast.literal_eval(keyword.value)
    sys.exit(f"smdebug_port.py: {path}: no FileDescriptor(serialized_pb=...): not a protoc 3.x module")


def rewrite_pb2(path: Path, root: Path) -> None:
    source = path.read_text()
    tree = ast.parse(source)
    # The modules it depends on (their descriptors must be in the pool first), as the original imports them.
    imports = [ast.get_source_segment(source, node) for node in tree.body
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("smdebug")]
    module = ".".join(path.relative_to(root).with_suffix("").parts)
    path.write_text(PB2_TEMPLATE.format(imports="\n".join(imports), serialized=serialized_descriptor(tree, path),
                                        module=module))


def relax_requirements(metadata: Path) -> None:
    text = metadata.read_text()
    for old, new in REQUIREMENTS.items():
        if old not in text.splitlines():
            sys.exit(f"smdebug_port.py: {metadata} has no line {old!r}: review the port for this smdebug version")
        text = text.replace(old, new)
    metadata.write_text(text)


def main(unpacked: str) -> int:
    root = Path(unpacked)
    modules = sorted((root / "smdebug").rglob("*_pb2.py"))
    if not modules:
        sys.exit(f"smdebug_port.py: no *_pb2.py under {root}/smdebug")
    for module in modules:
        rewrite_pb2(module, root)
    (metadata,) = root.glob("smdebug-*.dist-info/METADATA")
    relax_requirements(metadata)
    print(f"smdebug_port.py: rewrote {len(modules)} pb2 modules; requirements: {', '.join(REQUIREMENTS.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
