#!/usr/bin/env python3
"""The documentation's promises, checked from the Markdown (`make lint` runs this):

- every page of the book (`docs/**/*.md`) is reachable from `docs/SUMMARY.md`, since mdBook
  renders only the pages the summary names;
- every relative link in README.md and the book points at a file that exists and, when it names
  an `#anchor` in a Markdown file, at a heading (or an HTML `id`/`name`) that file has. Anchors
  are computed as GitHub and mdBook compute them: the heading's text, lower-cased, without
  punctuation except `-` and `_`, spaces turned into `-`, a repeated heading suffixed `-1`, `-2`;
- no link of a book page leaves `docs/`: the rendered book holds only that folder, so such a
  link would be broken there (write the path as code instead);
- no page repeats another's text (one home per fact, linked from elsewhere): 15 words or more
  of a sentence, in a row, may appear in only one of README.md and the book's pages, whether
  the other page has them as a sentence of its own or inside a longer one. Words are compared
  normalised: lower-cased, a link reduced to its text, inline code, emphasis and HTML markers
  dropped, and the punctuation around each word ignored (so line breaks, a comma or a
  parenthesis make no difference). Only prose is read: code blocks, tables, HTML comments and
  headings are not. docs/CHANGELOG.md is left out, since history repeats by nature.

- every top-level field of the file formats' JSON Schemas (`schemas/adapter.schema.json`,
  `schemas/definition.schema.json`) is named in its reference page (`docs/reference/
  adapter-file.md`, `definition-file.md`) as inline code: the field itself, or a path into it
  (`verify.probe`, `steps[].name`), so a field added to a format cannot go undocumented.

Images are links too: `![the queue](images/queue.png)` must name a file that exists.
Links to other sites (`http:`, `https:`, `mailto:`, any scheme) are not followed; fenced and
indented code blocks, inline code and HTML comments are not read for links.

`scripts/check-docs.py [ROOT]` checks the tree at ROOT (this repository by default); prints
each problem as `file:line: sentence` and exits 1 if there is one.
`scripts/check-docs-test.py` proves each rule fails.
"""

import json
import os.path
import re
import sys
from pathlib import Path
from urllib.parse import unquote

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:\s+(.*?))?\s*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # the text, one level of nested brackets allowed
    r"\(\s*(<[^>]*>|[^)\s]+)"  # the destination
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"  # an optional title
)
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_LINK = re.compile(r"\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.I)
HTML_ANCHOR = re.compile(r"<[a-z][^>]*\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
HTML_TAG = re.compile(r"<[^>]+>")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# Each file format's schema and the reference page that must name every one of its fields.
FORMATS = [
    ("schemas/adapter.schema.json", "docs/reference/adapter-file.md"),
    ("schemas/definition.schema.json", "docs/reference/definition-file.md"),
]
HEADING_ID = re.compile(r"\s*\{#([^}\s]+)[^}]*\}\s*$")  # mdBook's `# Title {#id}`


def readable_lines(text: str) -> list:
    """The lines links and headings may be read from: (number, line, is_heading_context), with
    code blocks and HTML comments blanked out (kept as empty lines so numbers stay right)."""
    out = []
    fence = None
    in_comment = False
    in_list = False
    previous_blank = True
    in_indented_code = False
    for number, line in enumerate(text.split("\n"), start=1):
        if fence:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) <= {fence[0]}:
                fence = None
            out.append((number, ""))
            continue
        opening = FENCE.match(line)
        if opening and not in_comment:
            fence = opening.group(1)
            out.append((number, ""))
            continue
        blank = not line.strip()
        indented = len(line) - len(line.lstrip(" ")) >= 4 or line.startswith("\t")
        if not blank and indented and not in_list and (previous_blank or in_indented_code):
            in_indented_code = True
            out.append((number, ""))
            continue
        if not blank:
            in_indented_code = False
            if LIST_ITEM.match(line):
                in_list = True
            elif not indented:
                in_list = False
        previous_blank = blank
        # HTML comments, possibly over several lines.
        kept = ""
        rest = line
        while rest:
            if in_comment:
                end = rest.find("-->")
                if end < 0:
                    rest = ""
                else:
                    in_comment = False
                    rest = rest[end + 3 :]
            else:
                start = rest.find("<!--")
                if start < 0:
                    kept += rest
                    rest = ""
                else:
                    kept += rest[:start]
                    in_comment = True
                    rest = rest[start + 4 :]
        out.append((number, kept))
    return out


def slug(heading: str) -> str:
    """The anchor GitHub and mdBook give a heading's text."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", text)
    text = HTML_TAG.sub("", text)
    text = text.replace("*", "").replace("~~", "")
    kept = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "-_":
            kept.append(ch)
        elif ch.isspace():
            kept.append("-")
    return "".join(kept)


def anchors_of(text: str) -> set:
    """Every anchor a Markdown file offers: its headings' and its HTML ids."""
    found = set()
    seen = {}
    lines = readable_lines(text)
    for index, (_, line) in enumerate(lines):
        for anchor in HTML_ANCHOR.findall(line):
            found.add(anchor)
        heading = None
        atx = ATX.match(line)
        if atx:
            heading = re.sub(r"\s+#+\s*$", "", atx.group(2) or "")
        elif index + 1 < len(lines) and line.strip() and not LIST_ITEM.match(line):
            below = lines[index + 1][1]
            if SETEXT.match(below) and "|" not in line and not ATX.match(line):
                heading = line.strip()
        if heading is None:
            continue
        custom = HEADING_ID.search(heading)
        if custom:
            found.add(custom.group(1))
            heading = heading[: custom.start()]
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links_of(text: str) -> list:
    """(line number, destination) of every link a reader could follow."""
    links = []
    for number, line in readable_lines(text):
        line = CODE_SPAN.sub(lambda m: "\u2060" * len(m.group(0)), line)
        for pattern in (INLINE_LINK, REFERENCE_DEF, HTML_LINK):
            for match in pattern.finditer(line):
                destination = match.group(1).strip()
                if destination.startswith("<") and destination.endswith(">"):
                    destination = destination[1:-1]
                links.append((number, destination))
    return links


REPEAT_WORDS = 15  # this many words in a row of a sentence have one home
TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
REFERENCE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[[^\]]*\]")
AUTOLINK = re.compile(r"<((?:[a-zA-Z][a-zA-Z0-9+.-]*:|[^\s>@]+@)[^\s>]*)>")
EMPHASIS = re.compile(r"(?<![\w\\])(\*{1,3}|_{1,3})(?=\S)|(?<=\S)(\*{1,3}|_{1,3})(?![\w])")
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]*_]*\s+")
QUOTE = re.compile(r"^\s{0,3}>\s?")


def prose_of(text: str) -> list:
    """The prose of a page as paragraphs: (first line number, text), the lines of a paragraph
    joined by newlines. Code blocks, HTML comments, tables and headings are left out; a list
    item, a heading or a blank line ends a paragraph."""
    lines = readable_lines(text)
    table = set()
    for index, (_, line) in enumerate(lines):
        header = lines[index - 1][1] if index else ""
        if not header.strip() or not TABLE_DELIMITER.match(line) or "|" not in line + header:
            continue
        table.update({index - 1, index})
        below = index + 1
        while below < len(lines) and lines[below][1].strip() and "|" in lines[below][1]:
            table.add(below)
            below += 1
    paragraphs = []
    current = []

    def close():
        if current:
            paragraphs.append((current[0][0], "\n".join(text for _, text in current)))
            current.clear()

    for index, (number, line) in enumerate(lines):
        line = QUOTE.sub("", line)
        below = lines[index + 1][1] if index + 1 < len(lines) else ""
        underlined = SETEXT.match(below) and not LIST_ITEM.match(line)
        heading = ATX.match(line) or SETEXT.match(line) or underlined
        if index in table or not line.strip() or heading:
            close()
            continue
        if LIST_ITEM.match(line):
            close()
            line = LIST_ITEM.sub("", line, count=1)
        current.append((number, line.strip()))
    close()
    return paragraphs


def plain(text: str) -> str:
    """Markdown reduced to the words a reader sees: a link to its text, inline code without its
    markers, no emphasis markers or HTML tags. Newlines are kept (they count lines)."""
    # Inline code first, its `<` and `>` kept from the HTML-tag rule (`<kind>` is text there).
    text = CODE_SPAN.sub(lambda m: m.group(2).replace("<", "\x01").replace(">", "\x02"), text)
    for _ in range(2):  # a link inside a link's text (an image in a link)
        text = INLINE_LINK.sub(lambda m: m[0][m[0].index("[") + 1 : m[0].rindex("](")], text)
        text = REFERENCE_LINK.sub(r"\1", text)
    text = AUTOLINK.sub(r"\1", text)
    text = HTML_TAG.sub("", text)
    text = EMPHASIS.sub("", text)
    return text.replace("\\", "").replace("\x01", "<").replace("\x02", ">")


def words_of(text: str) -> list:
    """The page's prose as normalised words: (word, line number), lower-cased, punctuation kept,
    a `None` word between paragraphs so no repeat is found across one."""
    words = []
    for first, paragraph in prose_of(text):
        for offset, line in enumerate(plain(paragraph).split("\n")):
            words.extend((word, first + offset) for word in line.lower().split())
        words.append((None, 0))
    return words


def sentences_of(words: list) -> list:
    """The sentences of a page's words, each a list of (bare word, line number): a sentence ends
    at a word ending in `.`, `!` or `?` (closing quotes and brackets aside) and at the end of a
    paragraph. Words are compared bare, without the punctuation around them."""
    sentences = []
    current = []
    for word, line in words:
        if word is not None:
            if bare(word):
                current.append((bare(word), line))
            if not SENTENCE_END.search(word + " "):
                continue
        if current:
            sentences.append(current)
        current = []
    if current:
        sentences.append(current)
    return sentences


def bare(word: str) -> str:
    """A word without the punctuation around it: `(sign-in),` is `sign-in`, `—` is nothing."""
    return re.sub(r"^[^\w]+|[^\w]+$", "", word)


class Checker:
    def __init__(self, root: Path):
        self.root = Path(_normalise(root))
        self.docs = self.root / "docs"
        self.anchor_cache = {}
        self.problems = []

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def report(self, path: Path, line: int, sentence: str) -> None:
        self.problems.append((self.rel(path), line, sentence))

    def anchors(self, path: Path) -> set:
        if path not in self.anchor_cache:
            self.anchor_cache[path] = anchors_of(path.read_text(encoding="utf-8"))
        return self.anchor_cache[path]

    def resolve(self, page: Path, destination: str):
        """The file a relative link names, and its anchor (None for other sites)."""
        if destination.startswith("//") or SCHEME.match(destination):
            return None
        target, _, anchor = destination.partition("#")
        target = unquote(target.split("?", 1)[0])
        path = page if not target else (page.parent / target)
        return Path(_normalise(path)), unquote(anchor)

    def check_links(self, page: Path, in_book: bool) -> None:
        for line, destination in links_of(page.read_text(encoding="utf-8")):
            resolved = self.resolve(page, destination)
            if resolved is None:
                continue
            target, anchor = resolved
            if not target.exists():
                self.report(page, line, f"link to `{destination}`: no such file ({self.rel(target)})")
                continue
            if in_book and not _inside(target, self.docs):
                self.report(
                    page,
                    line,
                    f"link to `{destination}` leaves docs/: the rendered book has no "
                    f"{self.rel(target)} (name it as code, or link a page of the book)",
                )
                continue
            if anchor and target.is_file() and target.suffix == ".md":
                if anchor not in self.anchors(target):
                    self.report(
                        page,
                        line,
                        f"link to `{destination}`: {self.rel(target)} has no heading "
                        f"whose anchor is `#{anchor}`",
                    )

    def check_summary(self, pages: list) -> None:
        summary = self.docs / "SUMMARY.md"
        if not summary.exists():
            self.report(summary, 1, "the book has no summary: docs/SUMMARY.md is missing")
            return
        listed = set()
        for _, destination in links_of(summary.read_text(encoding="utf-8")):
            resolved = self.resolve(summary, destination)
            if resolved is not None:
                listed.add(resolved[0])
        for page in pages:
            if page != summary and page not in listed:
                self.report(
                    page, 1, "not reachable from docs/SUMMARY.md: the rendered book leaves it out"
                )

    def check_repeats(self, pages: list) -> None:
        """No page repeats another's text: any REPEAT_WORDS words in a row of one sentence that
        also appear in a row in a sentence of another page are reported, at the later page in
        the order README.md, then the book's pages, with the other place: once per pair of
        sentences, at the first run they share."""
        pages = [page for page in pages if page != self.docs / "CHANGELOG.md"]
        order = {page: n for n, page in enumerate(pages)}
        runs = {}
        for page in pages:
            sentences = sentences_of(words_of(page.read_text(encoding="utf-8")))
            for number, sentence in enumerate(sentences):
                for start in range(len(sentence) - REPEAT_WORDS + 1):
                    run = tuple(word for word, _ in sentence[start : start + REPEAT_WORDS])
                    runs.setdefault(run, []).append((order[page], number, sentence[start][1]))
        shared = {}
        for run, places in runs.items():
            for home in places:
                for later in places:
                    if home[0] < later[0]:
                        pair = (later[0], later[1], home[0], home[1])
                        if pair not in shared or (later[2], home[2]) < shared[pair][:2]:
                            shared[pair] = (later[2], home[2], run)
        for (page, _, home, _), (line, home_line, run) in shared.items():
            quoted = " ".join(run[:10]) + " …"
            self.report(
                pages[page],
                line,
                f"repeats {self.rel(pages[home])}:{home_line} (\"{quoted}\", {REPEAT_WORDS} words "
                f"or more word for word): one home per fact, keep the text in one page and link "
                f"to it from the other",
            )

    def check_formats(self) -> None:
        """Every top-level field of each file format's schema is named in its reference page."""
        for schema, page in FORMATS:
            schema, page = self.root / schema, self.root / page
            if not schema.exists() or not page.exists():
                continue
            fields = json.loads(schema.read_text(encoding="utf-8")).get("properties", {})
            named = {span.strip() for _, span in CODE_SPAN.findall(page.read_text(encoding="utf-8"))}
            for field in fields:
                if not any(n == field or n.startswith((field + ".", field + "[")) for n in named):
                    self.report(
                        page,
                        1,
                        f"`{field}` of {self.rel(schema)} is not named here: say what it means",
                    )

    def run(self) -> list:
        pages = sorted(Path(_normalise(p)) for p in self.docs.rglob("*.md")) if self.docs.is_dir() else []
        if self.docs.is_dir():
            self.check_summary(pages)
        readme = self.root / "README.md"
        if readme.exists():
            self.check_links(Path(_normalise(readme)), in_book=False)
        for page in pages:
            self.check_links(page, in_book=True)
        self.check_repeats(([Path(_normalise(readme))] if readme.exists() else []) + pages)
        self.check_formats()
        return [f"{file}:{line}: {sentence}" for file, line, sentence in sorted(self.problems)]


def _normalise(path: Path) -> str:
    """An absolute path with `.` and `..` folded, links left as they are (the book is a folder)."""
    return os.path.normpath(os.path.abspath(path))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    problems = Checker(root).run()
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
