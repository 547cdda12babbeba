#!/usr/bin/env python3
"""The layout's promises, checked from the source (`make lint` runs this):

- no import circle between the modules of a crate (a module may use its ancestors: `super::`
  is containment, not a circle), nor between its top-level folders (`store` using `definition`
  while `definition` uses `store` is a circle even when no two files form one);
- no source file over 500 lines, no test file (under `<crate>/tests/`) over 800, and no
  function over 80 lines outside tests, except the Leptos components listed in VIEW_EXCEPTIONS
  (their bodies are one `view!` template);
- every `sqlx::query` and `sqlx::raw_sql` of the engine under engine/src/store/ or
  engine/src/read/ (or engine/src/embedded_pg/, which administers the private cluster).

`scripts/check-layout.py [ROOT]` checks the tree at ROOT (this repository by default); prints
each breach and exits 1 if there is one. `scripts/check-layout-test.py` proves each rule fails.
"""

import re
import sys
from pathlib import Path

CRATES = ["engine", "app", "server", "destinations"]
MAX_FILE_LINES = 500
MAX_TEST_FILE_LINES = 800
MAX_FN_LINES = 80
# Components whose body is a single `view!` template: splitting them would scatter one page.
VIEW_EXCEPTIONS = {
    "app/src/incidents/components.rs:Incident",
    "app/src/overview/components.rs:OutcomeCharts",
    "app/src/review/components.rs:Queue",
    "app/src/steps/components.rs:Evidence",
}
SQL_HOMES = ("engine/src/store/", "engine/src/read/", "engine/src/embedded_pg/")
SQL = re.compile(r"\bsqlx::(?:query|raw_sql)")

FN = re.compile(r"^(\s*)(?:pub(?:\([a-z]+\))? )?(?:async )?(?:const )?fn (\w+)")
PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super)((?:::\w+)*)::\{([^;]*)\}", re.S)


def module_of(src: Path, file: Path) -> tuple:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def code_of(text: str) -> str:
    """The text without comments and string literals, so neither counts as an import."""
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def referenced(module: tuple, text: str, modules: set) -> set:
    """The crate's modules `text` names through `crate::` or `super::` paths."""
    paths = []
    for m in USE_GROUP.finditer(text):
        for item in re.split(r"[,\s]+", m.group(3)):
            head = item.split("::")[0]
            if head and head != "self":
                paths.append((m.group(1), m.group(2) + "::" + head))
            elif head == "self":
                paths.append((m.group(1), m.group(2)))
    paths += [(m.group(1), m.group(2)) for m in PATH.finditer(text)]
    found = set()
    for root, rest in paths:
        base = () if root == "crate" else module[:-1]
        segments = [s for s in rest.split("::") if s]
        while segments and segments[0] == "super":
            base, segments = base[:-1], segments[1:]
        target = base + tuple(segments)
        while target and target not in modules:
            target = target[:-1]
        found.add(target)
    return found


def circles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def long_functions(path: Path, lines: list) -> list:
    found, in_tests = [], False
    for i, line in enumerate(lines):
        if re.match(r"^\s*#\[cfg\(test\)\]", line):
            in_tests = True
        m = FN.match(line)
        if not m or in_tests or line.rstrip().endswith(";"):
            continue
        indent, end = m.group(1), i
        for j in range(i, len(lines)):
            if lines[j] == indent + "}" or (j == i and line.rstrip().endswith("}")):
                end = j
                break
        length = end - i + 1
        if length > MAX_FN_LINES and f"{path}:{m.group(2)}" not in VIEW_EXCEPTIONS:
            found.append(f"{path}:{i + 1}: fn {m.group(2)} is {length} lines (at most {MAX_FN_LINES})")
    return found


def folders(graph: dict) -> dict:
    """The graph of a crate's top-level folders (and root files): an edge wherever one of its
    modules uses a module of another."""
    tops = {}
    for module, targets in graph.items():
        edges = tops.setdefault(module[:1], set())
        edges.update(t[:1] for t in targets if t[:1] and t[:1] != module[:1])
    for edges in list(tops.values()):
        for t in edges:
            tops.setdefault(t, set())
    return tops


def check_crate(root: Path, crate: str) -> list:
    breaches = []
    src = root / crate / "src"
    files = sorted(src.rglob("*.rs"))
    modules = {module_of(src, f): f for f in files}
    graph = {}
    for module, file in modules.items():
        rel = file.relative_to(root)
        text = file.read_text()
        lines = text.split("\n")
        if len(lines) > MAX_FILE_LINES:
            breaches.append(f"{rel}: {len(lines)} lines (at most {MAX_FILE_LINES})")
        breaches += long_functions(rel, lines)
        if crate == "engine" and SQL.search(text) and not str(rel).startswith(SQL_HOMES):
            breaches.append(f"{rel}: SQL outside engine/src/store, read and embedded_pg")
        targets = referenced(module, code_of(text), set(modules))
        # A module may use its ancestors (and itself): that is containment, not a circle.
        graph[module] = {t for t in targets if t != module[: len(t)]}
    for circle in circles(graph):
        names = ", ".join("::".join(m) or "crate" for m in circle)
        breaches.append(f"{crate}: import circle between {names}")
    for circle in circles(folders(graph)):
        names = ", ".join("::".join(m) for m in circle)
        breaches.append(f"{crate}: import circle between the folders {names}")
    for file in sorted((root / crate / "tests").rglob("*.rs")):
        length = len(file.read_text().split("\n"))
        if length > MAX_TEST_FILE_LINES:
            rel = file.relative_to(root)
            breaches.append(f"{rel}: {length} lines (a test file has at most {MAX_TEST_FILE_LINES})")
    return breaches


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    breaches = [b for crate in CRATES if (root / crate / "src").is_dir() for b in check_crate(root, crate)]
    for breach in breaches:
        print(breach)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
