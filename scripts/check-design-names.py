#!/usr/bin/env python3
"""docs/DESIGN.md names nothing the tree lacks (`make lint` runs this). Of its inline code spans:

- a repository path (it holds a `/` and ends in a source or document extension, or ends in `/`,
  or begins with one of the repository's top-level folders) exists, as a file, a folder or a
  glob that matches something: relative to the repository, or, as the page says of its names,
  to the engine crate (`domain/contract.rs` is engine/src/domain/contract.rs). A trailing
  `#anchor` or `:line` is dropped; a trailing `::item` (`engine/src/store/batch.rs::take`) must
  also appear as a word in that file;
- a Rust path whose first segment is a crate (`engine`, `server`, `app`, `destinations`) or a
  top-level module of one (`store::conclusion::settle`, `domain::Claim`) leads to a module file
  (`x.rs` or `x/mod.rs`, followed segment by segment as far as they are modules), and each
  remaining segment appears as a word in that file. A module several crates have passes when
  one of them holds the name; a trailing call (`failpoint::hit(FaultPoint)`) is dropped;
- every other span (SQL, states, commands, JSON, URLs, absolute paths, names relative to a
  module the page spoke of just before) is not a name of the tree and is not checked;
- the table of §4 (the checkpoints, their transactions and files) is, line for line, the table
  in the header of engine/src/worker/mod.rs, so the worker's map cannot drift from the page.

`scripts/check-design-names.py [ROOT]` checks ROOT/docs/DESIGN.md against the tree at ROOT (this
repository by default); prints each breach with its line and exits 1 if there is one.
`scripts/check-design-names-test.py` proves a stale path and a stale Rust item fail.
"""

import re
import sys
from pathlib import Path

CRATES = ["engine", "server", "app", "destinations"]
DOC = "docs/DESIGN.md"
WORKER_MAP = "engine/src/worker/mod.rs"
EXTENSIONS = (".rs", ".sql", ".py", ".sh", ".ts", ".yaml", ".yml", ".toml", ".md", ".json", ".css")
TOP_FOLDERS = ("engine/", "app/", "server/", "destinations/", "migrations/", "scripts/", "end2end/",
               "docs/", "adapters/", "definitions/", "style/", "schemas/")
# A span inside one pair of backticks; it may wrap onto the next line of its paragraph.
SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*?)`")
RUST_PATH = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)+")
FILE_ITEM = re.compile(r"^(.*?\.\w+)::([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)$")


def spans(text: str) -> list:
    """Each inline code span of `text` with the line it starts on, line breaks made spaces."""
    return [(text.count("\n", 0, m.start()) + 1, " ".join(m.group(1).split()))
            for m in SPAN.finditer(text)]


def has_word(file: Path, word: str) -> bool:
    """Whether `word` appears in `file` as a whole word (a definition, a use or a re-export)."""
    return re.search(r"\b" + re.escape(word) + r"\b", file.read_text()) is not None


def looks_like_path(span: str) -> bool:
    """A repository path, as opposed to a URL, an absolute path, a media type or a template."""
    if "/" not in span or span.startswith("/") or "://" in span or re.search(r"[\s<>{}()\"'=]", span):
        return False
    bare = re.sub(r"(::\w+)+$|#[\w-]+$|:\d+$", "", span)
    return bare.endswith(EXTENSIONS) or bare.endswith("/") or bare.startswith(TOP_FOLDERS)


def check_path(root: Path, span: str) -> list:
    """Breaches of a path span: the file (or folder, or glob) is missing, or its item is."""
    path, items = span, []
    m = FILE_ITEM.match(span)
    if m:
        path, items = m.group(1), m.group(2).split("::")
    path = re.sub(r"#[\w-]+$|:\d+$", "", path)
    found = []
    for base in (root, root / "engine" / "src"):
        found = sorted(base.glob(path)) if "*" in path else [base / path] if (base / path).exists() else []
        if found:
            break
    if not found:
        return [f"`{span}`: no {path} in the repository or under engine/src"]
    missing = [i for i in items if not (found[0].is_file() and has_word(found[0], i))]
    return [f"`{span}`: {found[0].relative_to(root)} has no `{i}`" for i in missing]


def walk(src: Path, segments: list) -> tuple:
    """The module file the segments lead to from the crate root at `src`, and the segments left."""
    file, folder = src / "lib.rs", src
    while segments:
        head = segments[0]
        if (folder / f"{head}.rs").is_file():
            file = folder / f"{head}.rs"
        elif (folder / head / "mod.rs").is_file():
            file = folder / head / "mod.rs"
        else:
            break
        folder, segments = folder / head, segments[1:]
    return file, segments


def check_rust(root: Path, span: str) -> list:
    """Breaches of a Rust path span, or none when its first segment is none of the tree's."""
    segments = re.sub(r"\(.*\)$", "", span).split("::")
    starts = []  # (crate source folder, segments to walk from its root)
    if segments[0] in CRATES and (root / segments[0] / "src").is_dir():
        starts.append((root / segments[0] / "src", segments[1:]))
    for crate in CRATES:
        src = root / crate / "src"
        if (src / f"{segments[0]}.rs").is_file() or (src / segments[0] / "mod.rs").is_file():
            starts.append((src, segments))
    if not starts:
        return []
    breaches = []
    for src, rest in starts:
        file, left = walk(src, rest)
        missing = [s for s in left if not has_word(file, s)]
        if not missing:
            return []
        breaches.append(f"{file.relative_to(root)} has no `{'`, `'.join(missing)}`")
    return [f"`{span}`: " + "; ".join(breaches)]


def table(lines: list) -> list:
    """The first Markdown table among `lines`: its rows, as they are written."""
    rows = []
    for line in lines:
        if line.startswith("|"):
            rows.append(line.rstrip())
        elif rows:
            break
    return rows


def check_worker_map(root: Path, text: str) -> list:
    """§4's table against the one in the header of the worker's module."""
    section = re.search(r"^## 4\..*?(?=^## )", text, re.S | re.M)
    if section is None:
        return []
    line = text.count("\n", 0, section.start()) + 1
    page = table(section.group(0).split("\n"))
    worker = root / WORKER_MAP
    header = [l[4:] for l in worker.read_text().split("\n") if l.startswith("//! ")] if worker.exists() else []
    if page != table(header):
        return [f"{DOC}:{line}: the table of §4 differs from the one in {WORKER_MAP}'s header"]
    return []


def check(root: Path) -> list:
    """Every breach of the page at ROOT, each with the line its span starts on."""
    breaches = check_worker_map(root, (root / DOC).read_text())
    for line, span in spans((root / DOC).read_text()):
        if looks_like_path(span):
            found = check_path(root, span)
        elif RUST_PATH.fullmatch(re.sub(r"\(.*\)$", "", span)):
            found = check_rust(root, span)
        else:
            found = []
        breaches += [f"{DOC}:{line}: {b}" for b in found]
    return breaches


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    breaches = check(root)
    for breach in breaches:
        print(breach)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
