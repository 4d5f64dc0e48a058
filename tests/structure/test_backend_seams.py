"""What only the MPI backend knows stays in backends/mpi (docs/launcher.md, "Adding a backend"): mpirun's rank tags
(backends/mpi/rank_tags.py cuts them; every other layer gets whole lines from the reader the backend hands its run)
and the MPI-only parts of the user's MPI options (parsed once in parse/mpi_options.py, with the config: the generic
layers read only its --NCCL_DEBUG, which sets NCCL_DEBUG on every job). Static: reads the source."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "container" / "src" / "sagemaker_mxnet_horovod"
MPI_BACKEND = PACKAGE / "backends" / "mpi"
# mpirun --tag-output's tags ("[1,3]<stderr>:") in any form a copy of rank_tags.py's would take (its regex
# rb"\[(\d+),(\d+)\]<(stdout|stderr)>:", a tag written out), and what the code calls them; docstrings and comments count
# too.
RANK_TAGS = re.compile("|".join((
    r"<\(?std",  # the tag's stream: <stderr>, or the regex's group <(stdout|stderr)>
    r"std(out|err)\|std(out|err)",  # the streams as a regex's alternatives
    r"\\\[\(\\d",  # the regex of the tag's [job,rank]: \[(\d+),(\d+)\]
    r"rank tag",
)), re.IGNORECASE)
# parse/mpi_options.MpiOptions: what only mpirun gets or reads (nccl_debug is every job's).
MPI_ONLY_OPTIONS = {"for_mpirun", "mca_names", "exported", "sets_mca", "exported_values"}


def outside_the_mpi_backend(*also_allowed: Path) -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py"))
            if MPI_BACKEND not in path.parents and path not in also_allowed]


def test_mpiruns_rank_tags_are_known_only_in_the_mpi_backend():
    found = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
             for path in outside_the_mpi_backend()
             for number, line in enumerate(path.read_text().splitlines(), 1) if RANK_TAGS.search(line)]
    assert found == []


def test_the_mpi_only_options_are_read_only_in_the_mpi_backend():
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno}: .{node.attr}"
             for path in outside_the_mpi_backend(PACKAGE / "parse" / "mpi_options.py")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Attribute) and node.attr in MPI_ONLY_OPTIONS]
    assert found == []


def test_the_check_knows_the_real_tag():
    # The tag as rank_tags.py matches it, and as it appears in mpirun's output: copied anywhere else, either is found.
    tag_source = next(line for line in (MPI_BACKEND / "rank_tags.py").read_text().splitlines()
                      if line.startswith("TAG = "))
    assert RANK_TAGS.search(tag_source) and RANK_TAGS.search('b"[1,3]<stderr>:"')
