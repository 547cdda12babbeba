#!/usr/bin/env python3
"""Proves each rule of check-docs.py fails on a tree that breaks it (and only then): a small
README and book are written to a temporary directory, broken one way at a time, and checked."""

import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = Path(__file__).resolve().parent / "check-docs.py"

# 21 words: a sentence with one home (docs/guide.md). Repeated in a table, a code block or the
# changelog it is no repeat; in the prose of another page it is.
LONG = (
    "A step whose answer was lost waits for a person, who sees the evidence before any button "
    "and acts on it."
)
# 14 words: short enough to say again anywhere.
SHORT = "The queue lists every step waiting for a person, oldest uncertainty first, with filters."

CLEAN = {
    "README.md": (
        "# Project\n\n"
        "Start with [the guide](docs/guide.md#run-the-demo), or the [book](docs/SUMMARY.md).\n"
        "![The queue](docs/images/queue.png)\n"
        "<!-- screenshots: docs/images/queue.png, [step](docs/images/step.png) -->\n\n"
        "```sh\n[not a link](docs/missing.md)\n```\n\n"
        "`[not a link either](docs/missing.md)` and [a site](https://example.com/x.md#y).\n\n"
        "    [an indented code block](docs/missing.md)\n"
    ),
    "docs/SUMMARY.md": (
        "# Summary\n\n[Introduction](intro.md)\n\n# Guides\n\n- [Guide](guide.md)\n"
        "  - [Reference](reference/api.md)\n  - [Adapter files](reference/adapter-file.md)\n"
        "- [Changelog](CHANGELOG.md)\n"
    ),
    "schemas/adapter.schema.json": '{"properties": {"name": {}, "verify": {}}}',
    "docs/reference/adapter-file.md": "# Adapter files\n\n`name` names it; `verify.probe` proves it.\n",
    "docs/intro.md": (
        "# Introduction\n\nRead the [guide](guide.md) and the [API](reference/api.md#routes).\n\n"
        f"{SHORT}\n\n| where | what |\n|---|---|\n| the guide | {LONG} |\n\n```text\n{LONG}\n```\n"
    ),
    "docs/CHANGELOG.md": f"# Changelog\n\n- The guide now says: {LONG}\n",
    "docs/images/queue.png": "not really a PNG\n",
    "docs/guide.md": (
        "# Guide\n\n## Run the demo\n\n## `z29c serve` — the server's (own) flags\n\n"
        "## Run the demo\n\nSee [flags](#z29c-serve--the-servers-own-flags), "
        "[the second](#run-the-demo-1) and [mail](mailto:ops@example.com).\n\n"
        "- a list item\n\n    [a continuation link](reference/api.md)\n\n"
        f"![The queue](images/queue.png)\n\n{LONG}\n\n{SHORT}\n"
    ),
    "docs/reference/api.md": "# API\n\nRoutes\n------\n\nBack to the [guide](../guide.md#guide).\n",
}

# Each break, the files it changes (None removes one) and what the report must say.
BROKEN = {
    "a link to a missing file": (
        {"docs/intro.md": "# Introduction\n\nRead the [guide](guid.md).\n"},
        "docs/intro.md:3: link to `guid.md`: no such file",
    ),
    "a link to a missing anchor": (
        {"docs/intro.md": "# Introduction\n\nRead [the demo](guide.md#run-a-demo).\n"},
        "docs/intro.md:3: link to `guide.md#run-a-demo`: docs/guide.md has no heading",
    ),
    "a link to a missing anchor on the same page": (
        {"docs/guide.md": "# Guide\n\n## Run the demo\n\nSee [below](#run-the-demo-1).\n"},
        "docs/guide.md:5: link to `#run-the-demo-1`",
    ),
    "a README link to a missing anchor": (
        {"README.md": "# Project\n\nStart with [the guide](docs/guide.md#start-here).\n"},
        "README.md:3: link to `docs/guide.md#start-here`",
    ),
    "a page the summary does not list": (
        {"docs/orphan.md": "# Orphan\n\nBack to the [guide](guide.md).\n"},
        "docs/orphan.md:1: not reachable from docs/SUMMARY.md",
    ),
    "a link in a list item's continuation to a missing file": (
        {"docs/guide.md": "# Guide\n\n- a list item\n\n    [a continuation](reference/apis.md)\n"},
        "docs/guide.md:5: link to `reference/apis.md`: no such file",
    ),
    "a book page linking outside docs/": (
        {"src.txt": "source\n", "docs/intro.md": "# Introduction\n\nThe [source](../src.txt).\n"},
        "docs/intro.md:3: link to `../src.txt` leaves docs/",
    ),
    "an image that does not exist": (
        {"docs/intro.md": "# Introduction\n\n![The step page](images/step.png)\n"},
        "docs/intro.md:3: link to `images/step.png`: no such file",
    ),
    "a sentence of 15 words or more repeated in another page": (
        {"docs/intro.md": f"# Introduction\n\nRead the [guide](guide.md).\n\n{LONG}\n"},
        "docs/intro.md:5: repeats docs/guide.md:17",
    ),
    "a repeat inside a longer sentence, linked, marked up and wrapped differently": (
        {
            "docs/intro.md": (
                "# Introduction\n\nHere, as everywhere, **a step** whose [answer](guide.md)\n"
                "was lost waits for a person, who sees the `evidence` before any button and\n"
                "acts on it; then it moves.\n"
            )
        },
        "docs/intro.md:3: repeats docs/guide.md:17",
    ),
    "a page repeating README.md": (
        {"README.md": f"# Project\n\nRead the [guide](docs/guide.md).\n\n{LONG}\n"},
        "docs/guide.md:17: repeats README.md:5",
    ),
    "a field of a file format its reference page does not name": (
        {"schemas/adapter.schema.json": '{"properties": {"name": {}, "verify": {}, "breaker": {}}}'},
        "docs/reference/adapter-file.md:1: `breaker` of schemas/adapter.schema.json is not named",
    ),
    "a missing summary": (
        {"docs/SUMMARY.md": None},
        "docs/SUMMARY.md:1: the book has no summary",
    ),
}


def verdict(files: dict) -> tuple:
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            if text is None:
                continue
            path = Path(root) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        run = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
        return run.returncode, run.stdout.strip()


def main() -> int:
    failures = []
    code, out = verdict(CLEAN)
    if code != 0:
        failures.append(f"the clean tree was refused: {out}")
    for name, (change, expected) in BROKEN.items():
        code, out = verdict({**CLEAN, **change})
        if code != 1 or not out:
            failures.append(f"{name} passed the check")
        elif expected not in out:
            failures.append(f"{name} was reported, but not as `{expected}`: {out}")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
