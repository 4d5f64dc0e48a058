"""Pointers to the docs lead somewhere: every `docs/...` page, chart or record named in the code, the scripts, the
tests and the docs exists, and so does every relative link of a Markdown page (README.md, docs/, benchmarks/), with
its #anchor (a heading, as GitHub makes its id, or an <a id>); no page names a path of the machine it was written on
(/work/, /home/). Static: reads the files."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEARCHED = ("container", "entrypoints", "benchmarks", "scripts", "tests", "docs", "docker", "examples", ".ci")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".yaml", ".yml", ".txt", ".toml", ".cfg", ".ini", ""}
# docs/<path>.md (or a chart, a record) as code and prose name it, from the repository's root ("../docs/..." and
# "tests/fixtures/docs/..." are not that: the character before decides).
NAMED = re.compile(r"(?<![\w./-])docs/[\w./-]*\w\.(?:md|png|json)")
LINK = re.compile(r"\]\(([^()\s#]+)(?:#[^()\s]*)?\)")
ANCHORED_LINK = re.compile(r"\]\(([^()\s#]*)#([^()\s]+)\)")
MACHINE_PATH = re.compile(r"(?<![\w.-])/(?:work|home)/")


def text_files():
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "buildspec.yml"]
    for folder in SEARCHED:
        files += [path for path in (ROOT / folder).rglob("*") if path.is_file() and path.suffix in TEXT_SUFFIXES
                  and not any(part.startswith(".") and part != ".ci" for part in path.relative_to(ROOT).parts)]
    return files


def markdown_pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "benchmarks").rglob("*.md"))]


def anchors(page: Path) -> set:
    """The #ids a page has: its <a id>s and its headings' (outside code blocks) as GitHub makes them: lower case,
    punctuation but hyphens dropped, spaces as hyphens, "-1", "-2" after a repeated one."""
    text, found, seen, fenced = page.read_text(), set(), {}, False
    found.update(re.findall(r'<a id="([^"]+)"', text))
    for line in text.splitlines():
        fenced ^= line.startswith("```")
        heading = None if fenced else re.match(r"#+\s+(.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def test_every_docs_path_named_exists():
    missing = sorted(f"{path.relative_to(ROOT)}: {named}" for path in text_files()
                     for named in set(NAMED.findall(path.read_text(errors="replace"))) if not (ROOT / named).exists())
    assert missing == []


def test_every_relative_link_of_a_page_exists():
    broken = sorted(f"{page.relative_to(ROOT)}: {target}" for page in markdown_pages()
                    for target in set(LINK.findall(page.read_text()))
                    if not re.match(r"[a-z]+:", target) and not (page.parent / target).exists())
    assert broken == []


def test_no_page_names_a_path_of_the_machine_it_was_written_on():
    found = sorted(f"{page.relative_to(ROOT)}:{number}: {line.strip()[:120]}" for page in markdown_pages()
                   for number, line in enumerate(page.read_text().splitlines(), 1) if MACHINE_PATH.search(line))
    assert found == []


def test_every_anchor_a_page_links_to_is_there():
    broken = []
    for page in markdown_pages():
        for target, anchor in set(ANCHORED_LINK.findall(page.read_text())):
            linked = page.parent / target if target else page
            if linked.suffix == ".md" and linked.is_file() and anchor not in anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}")
    assert sorted(broken) == []
