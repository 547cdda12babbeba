#!/usr/bin/env python3
"""Runs a tutorial page's commands, literally as written, so the page cannot rot.

    scripts/run-tutorial.py [PAGE]        (default: docs/integrate-your-own-api.md)

Every fenced block whose info string is exactly `sh` is a command the reader types; every other
block (```yaml, ```text, ```console …) is only shown. The `sh` blocks run in order in ONE bash
process (`set -euo pipefail`), from the repository root, so the variables, functions and
background jobs one block makes are there for the next, as in the reader's shell. Each block's
first line and the page line it starts at are printed before it runs, its output after; the
first block that fails stops the run, which then names it (the page line) and prints its output.

Whatever happens, the run cleans up after itself: it starts from an empty `.z29c/tutorial`
(and refuses to start when a port the page's servers listen on is taken), and at the end stops
every process the tutorial left running (its whole process group) and every PostgreSQL cluster
left running in the tutorial's data directories; `.z29c/tutorial` is removed after a run that
passed and kept after one that failed. The whole run has a time limit (TUTORIAL_TIMEOUT
seconds, 600 by default). The page needs bash, curl and jq.

`make tutorial` runs it (and `make test`), with the built `z29c` on PATH.
"""

import hashlib
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PAGE = ROOT / "docs" / "integrate-your-own-api.md"
# Everything the tutorial makes lives here (its own clusters included).
WORK_DIR = ROOT / ".z29c" / "tutorial"
# Where a private cluster lives when Z29C runs as root and the `postgres` user cannot reach the
# directory asked for (engine/src/embedded_pg/place.rs).
RELOCATED_ROOT = Path("/var/lib/z29c/clusters")
TIMEOUT = int(os.environ.get("TUTORIAL_TIMEOUT", "600"))

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
# The addresses the tutorial's servers listen on (`--addr 127.0.0.1:3300`): they must be free.
ADDR = re.compile(r"--addr\s+(127\.0\.0\.1|localhost):(\d+)")


def sh_blocks(text):
    """The page's fenced blocks whose info string is exactly `sh`: (first line number, code)."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        if fence[0] == "`" and "`" in info:
            i += 1  # not a fence: an inline code span at the start of a line
            continue
        start = i + 1
        body = []
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if (
                close
                and close.group(2)[0] == fence[0]
                and len(close.group(2)) >= len(fence)
                and not close.group(3).strip()
            ):
                break
            line = lines[i]
            # A fence indented by N spaces takes up to N spaces off each line of its content.
            strip = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[strip:])
            i += 1
        i += 1  # past the closing fence (or the end of the page)
        if info == "sh":
            blocks.append((start + 1, "\n".join(body)))
    return blocks


def script(blocks, page_name, out_dir):
    """One bash script running every block in order, each in a `{ … }` group (the current
    shell: what it sets stays set), its output kept in a file of its own, then printed; and the
    script line each block's code starts on."""
    failed_line = shlex.quote(str(out_dir / "failed-line"))
    lines = [
        "set -euo pipefail",
        # Which block is running, and the line of the command that failed (in a function too:
        # -E), for the report.
        f"__tutorial_at={shlex.quote(str(out_dir / 'at'))}",
        "set -E",
        f"trap 'echo $LINENO > {failed_line}' ERR",
    ]
    starts = []
    for n, (line, code) in enumerate(blocks):
        first = next((l for l in code.splitlines() if l.strip()), "")
        out = out_dir / f"block-{n}.out"
        banner = f"==> {page_name}:{line}: {first}"
        lines += [
            f"rm -f {failed_line}",
            f"printf '%s\\n' {shlex.quote(str(n))} > \"$__tutorial_at\"",
            f"printf '%s\\n' {shlex.quote(banner)}",
            "{",
        ]
        starts.append(len(lines) + 1)
        lines += code.split("\n")
        lines += [
            f"}} > {shlex.quote(str(out))} 2>&1 < /dev/null",
            f"sed 's/^/    /' {shlex.quote(str(out))}",
        ]
    lines.append("printf 'done\\n' > \"$__tutorial_at\"")
    return "\n".join(lines) + "\n", starts


def ports_in_use(blocks):
    """The loopback ports the blocks' servers will listen on that something already holds."""
    taken = []
    for _, code in blocks:
        for host, port in ADDR.findall(code):
            with socket.socket() as probe:
                probe.settimeout(1)
                if probe.connect_ex(("127.0.0.1", int(port))) == 0:
                    taken.append(int(port))
    return sorted(set(taken))


def relocated(data_dir):
    """Where Z29C would have put `data_dir`'s cluster had the postgres user not reached it."""
    real = os.path.realpath(data_dir)
    digest = hashlib.sha256(real.encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(data_dir).name)
    return RELOCATED_ROOT / f"{digest}-{name}"


def data_dirs():
    """The tutorial's cluster data directories: each directory in WORK_DIR, and where Z29C
    would have relocated it (a `.lock` file beside a data directory names one too)."""
    if not WORK_DIR.is_dir():
        return []
    names = {p.name for p in WORK_DIR.iterdir() if p.is_dir()}
    names |= {p.name[: -len(".lock")] for p in WORK_DIR.glob("*.lock")}
    dirs = []
    for name in sorted(names):
        dirs.append(WORK_DIR / name)
        dirs.append(relocated(WORK_DIR / name))
    return dirs


def pg_ctl():
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return str(found[-1]) if found else shutil.which("pg_ctl")


def stop_clusters():
    """Stops every PostgreSQL server still running in one of the tutorial's data directories,
    as the account that owns it (PostgreSQL refuses root)."""
    tool = pg_ctl()
    for data_dir in data_dirs():
        if not (data_dir / "postmaster.pid").is_file():
            continue
        if tool is None:
            print(f"run-tutorial: no pg_ctl to stop the cluster in {data_dir}", file=sys.stderr)
            continue
        owner = data_dir.stat().st_uid
        kwargs = {}
        if os.geteuid() == 0 and owner != 0:
            kwargs["user"] = pwd.getpwuid(owner).pw_name
        result = subprocess.run(
            [tool, "-D", str(data_dir), "-m", "fast", "-w", "stop"],
            cwd="/",
            capture_output=True,
            text=True,
            **kwargs,
        )
        if result.returncode == 0:
            print(f"run-tutorial: stopped the cluster left running in {data_dir}")
        elif "No such process" not in result.stderr and "not running" not in result.stderr:
            print(f"run-tutorial: pg_ctl stop {data_dir}: {result.stderr.strip()}", file=sys.stderr)


def remove_work_dir():
    for data_dir in data_dirs():
        if data_dir.parent == RELOCATED_ROOT and data_dir.exists():
            shutil.rmtree(data_dir)
    shutil.rmtree(WORK_DIR, ignore_errors=True)


def kill_group(proc):
    """Stops what is left of the tutorial's processes (the group `proc`, its shell, leads):
    TERM, a few seconds to shut down (each `z29c` stops the cluster it owns), then KILL."""
    for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()  # the shell, once it exits, is a zombie in the group until reaped
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def main(argv):
    page = Path(argv[1]) if len(argv) > 1 else DEFAULT_PAGE
    if not page.is_absolute():
        page = Path.cwd() / page
    try:
        page_name = str(page.resolve().relative_to(ROOT))
    except ValueError:
        page_name = str(page)
    blocks = sh_blocks(page.read_text())
    if not blocks:
        print(f"{page_name}: no ```sh block to run", file=sys.stderr)
        return 1

    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    if missing:
        print(f"run-tutorial: {page_name} needs {', '.join(missing)} on PATH", file=sys.stderr)
        return 1

    stop_clusters()  # a previous run's, killed before it could clean up
    remove_work_dir()
    taken = ports_in_use(blocks)
    if taken:
        print(
            f"run-tutorial: {page_name} serves on {', '.join(map(str, taken))}, which another "
            "process already listens on (`ss -ltnp` names it): stop it first",
            file=sys.stderr,
        )
        return 1
    out_dir = Path(tempfile.mkdtemp(prefix="z29c-tutorial-"))
    script_path = out_dir / "tutorial.sh"
    text, starts = script(blocks, page_name, out_dir)
    script_path.write_text(text)
    print(f"run-tutorial: {len(blocks)} blocks of {page_name}")

    # What a reader's shell would not set either: a backtrace on every error the CLI reports
    # (panics keep theirs), colours in log files.
    env = dict(os.environ)
    env.setdefault("RUST_LIB_BACKTRACE", "0")
    env.setdefault("NO_COLOR", "1")
    # Stopped from outside (make interrupted, a CI timeout): clean up all the same.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)

    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", str(script_path)],
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group: every background job is in it
        stdin=subprocess.DEVNULL,
    )
    timed_out = False
    try:
        code = proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        timed_out = True
        code = None
    except KeyboardInterrupt:
        code = 130
    finally:
        kill_group(proc)
        proc.wait()
        stop_clusters()
    elapsed = time.monotonic() - started

    at = (out_dir / "at").read_text().strip() if (out_dir / "at").is_file() else ""
    if code == 0 and at == "done":
        print(f"run-tutorial: {page_name}: all {len(blocks)} blocks passed in {elapsed:.0f} s")
        shutil.rmtree(out_dir, ignore_errors=True)
        remove_work_dir()  # kept after a failure, to look at
        return 0

    if at.isdigit():
        n = int(at)
        line, code_text = blocks[n]
        why = f"timed out after {TIMEOUT} s" if timed_out else f"exited {code}"
        failed = out_dir / "failed-line"
        if not timed_out and failed.is_file() and failed.read_text().strip().isdigit():
            offset = int(failed.read_text()) - starts[n]
            if 0 <= offset < len(code_text.split("\n")):
                why += f" (the command on or ending at line {line + offset})"
        print(
            f"\nrun-tutorial: {page_name}:{line}: the block starting on line {line} {why}:",
            file=sys.stderr,
        )
        print("\n".join("  | " + l for l in code_text.splitlines()), file=sys.stderr)
        output = out_dir / f"block-{n}.out"
        text = output.read_text(errors="replace") if output.is_file() else ""
        print("its output:", file=sys.stderr)
        print("\n".join("    " + l for l in text.splitlines()) or "    (none)", file=sys.stderr)
        for log in sorted(WORK_DIR.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print(f"the last lines of {log.relative_to(ROOT)}:", file=sys.stderr)
            print("\n".join("    " + l for l in tail), file=sys.stderr)
    else:
        print(f"\nrun-tutorial: {page_name}: bash exited {code} before any block", file=sys.stderr)
    print(f"(the script and every block's output: {out_dir})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
