#!/usr/bin/env python3
"""Proves check-design-names.py fails on a stale name (and only then): a small tree and a design
page naming what it holds are written to a temporary directory, one stale name added at a time,
and checked; each must fail and be named in the breach."""

import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = Path(__file__).resolve().parent / "check-design-names.py"

# Names that exist, and spans that name nothing of the tree (a URL, a media type, a template, SQL,
# another crate's path, a call): the clean page must pass with all of them.
PAGE = """# Design

The claim (`store::batch::take`, `engine/src/store/batch.rs::take`, `engine::store`) reads
`domain/contract.rs` and `migrations/0001_step.sql`; the adapters are `adapters/*-docs.yaml`
under `adapters/`. A fault (`failpoint::hit(FaultPoint)`) and a step (`domain::StepKind`,
`failpoint::hit`) are named by `server::http::headers` and `http::headers`; a span may wrap
(`z29c
check --before-resume`) without pairing the next backticks wrongly. Not names of the tree: `/api/v1/workflows/{id}`, `text/html`, `sqlx::query`,
`FOR UPDATE SKIP LOCKED`, `<original key>/withdraw-<n>`, `RequestKey::derive`, `{"accepted": false}`.
"""

CLEAN = {
    "docs/DESIGN.md": PAGE,
    "engine/src/lib.rs": "pub mod domain;\npub mod failpoint;\npub mod store;\n",
    "engine/src/domain/mod.rs": "mod contract;\npub use contract::StepKind;\n",
    "engine/src/domain/contract.rs": "pub enum StepKind { Pure }\n",
    "engine/src/failpoint.rs": "pub fn hit(_: FaultPoint) {}\npub struct FaultPoint;\n",
    "engine/src/store/mod.rs": "pub mod batch;\n",
    "engine/src/store/batch.rs": "pub async fn take() {}\n",
    "server/src/lib.rs": "pub mod http;\n",
    "server/src/http/mod.rs": "pub mod headers;\n",
    "server/src/http/headers.rs": "pub fn set() {}\n",
    "destinations/src/lib.rs": "pub mod http;\n",
    "destinations/src/http.rs": "pub fn serve() {}\n",
    "migrations/0001_step.sql": "create table step (id uuid);\n",
    "adapters/idempotent-docs.yaml": "name: idempotent-docs\n",
}

STALE = {
    "a repository path that is gone": "`engine/src/store/gone.rs`",
    "a path under the engine crate that is gone": "`store/gone.rs`",
    "a folder that is gone": "`engine/src/gone/`",
    "a glob that matches nothing": "`adapters/*-gone.yaml`",
    "a path's item that is gone": "`engine/src/store/batch.rs::claim_due`",
    "a Rust item that is gone": "`store::batch::claim_due`",
    "a Rust item behind a crate name that is gone": "`engine::store::batch::claim_due`",
    "a module that is gone": "`engine::store::lease`",
    "a called Rust item that is gone": "`failpoint::arm(FaultPoint)`",
    "an item no crate of a shared module holds": "`http::headers::refuse`",
    "a stale name after a span that wraps": "`z29c\ncheck`) then (`store::batch::claim_due`",
}


def verdict(files: dict) -> tuple:
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            path = Path(root) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        run = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
        return run.returncode, run.stdout.strip()


MAP = "| tx | file |\n|---|---|\n| A | `engine/src/store/batch.rs` |\n"
WITH_MAP = {
    **CLEAN,
    "docs/DESIGN.md": PAGE + "\n## 4. Checkpoints\n\n" + MAP + "\nMore.\n\n## 5. Next\n",
    "engine/src/worker/mod.rs": "//! The worker.\n//!\n" + "".join(f"//! {l}\n" for l in MAP.splitlines()),
}


def main() -> int:
    failures = []
    for tree in (CLEAN, WITH_MAP):
        code, out = verdict(tree)
        if code != 0:
            failures.append(f"a clean tree was refused: {out}")
    drifted = {**WITH_MAP, "engine/src/worker/mod.rs": WITH_MAP["engine/src/worker/mod.rs"].replace("| A |", "| B |")}
    code, out = verdict(drifted)
    if code != 1 or "§4" not in out:
        failures.append("a worker map that differs from §4's table passed the check")
    for name, span in STALE.items():
        code, out = verdict({**CLEAN, "docs/DESIGN.md": PAGE + f"\nAlso {span}.\n"})
        stale = span.split("`")[-2]  # the last span of the addition is the stale name
        if code != 1 or stale not in out:
            failures.append(f"{name} (`{stale}`) passed the check")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
