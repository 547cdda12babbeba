#!/usr/bin/env python3
"""Proves each rule of check-layout.py fails on a tree that breaks it (and only then):
a small crate is written to a temporary directory, broken one way at a time, and checked."""

import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = Path(__file__).resolve().parent / "check-layout.py"

CLEAN = {
    "engine/src/lib.rs": "pub mod domain;\npub mod store;\npub mod worker;\n",
    "engine/src/domain/mod.rs": "pub mod names;\n",
    "engine/src/domain/names.rs": "pub fn is_name() -> bool { true }\n",
    "engine/src/store/mod.rs": "pub mod step;\n",
    "engine/src/store/step.rs": 'use crate::domain::names;\npub fn f() { sqlx::query("select 1"); }\n',
    "engine/src/worker/mod.rs": "pub mod claim;\n",
    "engine/src/worker/claim.rs": "use crate::store::step;\n",
    "engine/tests/engine/main.rs": "#[test]\nfn passes() {}\n",
}

BROKEN = {
    "a folder-level loop no two files form": {
        "engine/src/domain/kind.rs": "use crate::worker::claim;\n",
    },
    "a circle between two files": {
        "engine/src/domain/names.rs": "use crate::store::step;\n",
    },
    "a test file over its limit": {
        "engine/tests/engine/long.rs": "// line\n" * 801,
    },
    "a source file over its limit": {
        "engine/src/domain/names.rs": "// line\n" * 501,
    },
    "a function over its limit": {
        "engine/src/domain/names.rs": "pub fn long() {\n" + "    let _ = 1;\n" * 80 + "}\n",
    },
    "raw SQL outside the store": {
        "engine/src/worker/claim.rs": 'pub fn f() { sqlx::raw_sql("truncate step"); }\n',
    },
    "a query outside the store": {
        "engine/src/worker/claim.rs": 'pub fn f() { sqlx::query("select 1"); }\n',
    },
}


def verdict(files: dict) -> tuple:
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
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
    for name, change in BROKEN.items():
        code, out = verdict({**CLEAN, **change})
        if code != 1 or not out:
            failures.append(f"{name} passed the check")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
