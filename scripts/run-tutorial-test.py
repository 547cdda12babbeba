#!/usr/bin/env python3
"""Proves scripts/run-tutorial.py does what it promises, on small pages in a scratch tree (no
`z29c`, no PostgreSQL): only ```sh blocks run, in order, in one shell; a failing block is named
by its page line with its output; background jobs are stopped after a run that passed, failed
or timed out; the run starts from an empty `.z29c/tutorial`; a taken port stops it before any
block runs. `make tutorial` runs this first.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNNER = Path(__file__).resolve().parent / "run-tutorial.py"
FENCE = "```"


def run(root, page_text, **env):
    """Runs the runner, copied into `root/scripts/`, on `page_text`: (exit code, stdout+stderr)."""
    (root / "scripts").mkdir(exist_ok=True)
    shutil.copy(RUNNER, root / "scripts" / "run-tutorial.py")
    page = root / "page.md"
    page.write_text(page_text)
    result = subprocess.run(
        [sys.executable, str(root / "scripts" / "run-tutorial.py"), str(page)],
        cwd=root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.returncode, result.stdout + result.stderr


def alive(pid_file):
    pid = int(pid_file.read_text().strip())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: nobody reaped it yet.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def gone(pid_file, within=5.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid_file):
            return True
        time.sleep(0.1)
    return False


def passing_page(root):
    return f"""# A page

{FENCE}sh
greeting=hello
say() {{ echo "$1, $2"; }}
sleep 300 &
echo $! > {root}/background.pid
test ! -e .z29c/tutorial/stale
{FENCE}

Shown, never run:

{FENCE}text
exit 3
{FENCE}

{FENCE}console
$ exit 4
{FENCE}

~~~sh
say "$greeting" world > {root}/said.txt
test "$PWD" = {root}
~~~
"""


def failing_page(root):
    return f"""# A page

{FENCE}sh
sleep 300 &
echo $! > {root}/background.pid
{FENCE}

{FENCE}sh
echo the output before the failure
false
echo never
{FENCE}

{FENCE}sh
touch {root}/never-ran
{FENCE}
"""


def main():
    failures = []

    def check(ok, what, output=""):
        if not ok:
            failures.append(f"{what}\n{output}")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        stale = root / ".z29c" / "tutorial" / "stale"
        stale.parent.mkdir(parents=True)
        stale.write_text("from a run before")
        code, out = run(root, passing_page(root))
        check(code == 0, "a page whose blocks all pass exits 0", out)
        check(
            (root / "said.txt").is_file() and (root / "said.txt").read_text() == "hello, world\n",
            "variables and functions carry from one ```sh block to the next",
            out,
        )
        check("exit 3" not in out and "exit 4" not in out, "only ```sh blocks run", out)
        check("page.md:4: greeting=hello" in out, "each block is announced with its line", out)
        check("page.md:22: say" in out, "a ~~~sh block runs too, announced with its line", out)
        check(gone(root / "background.pid"), "a background job is stopped after a passing run")
        check(not stale.parent.exists(), "the tutorial's directory is removed after a passing run")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        code, out = run(root, failing_page(root))
        check(code == 1, "a failing block makes the run exit 1", out)
        check("page.md:9: the block starting on line 9 exited 1" in out, "the failing block is named", out)
        check("(the command on or ending at line 10)" in out, "the failing line is named", out)
        check("the output before the failure" in out, "the failing block's output is shown", out)
        check("never" not in out.split("its output:")[-1], "the run stops at the failing line", out)
        check(not (root / "never-ran").exists(), "no block runs after the failing one", out)
        check(gone(root / "background.pid"), "a background job is stopped after a failed run")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        page = f"{FENCE}sh\nsleep 300 &\necho $! > {root}/background.pid\nsleep 60\n{FENCE}\n"
        started = time.monotonic()
        code, out = run(root, page, TUTORIAL_TIMEOUT="2")
        check(code == 1 and "timed out after 2 s" in out, "the run has a time limit", out)
        check(time.monotonic() - started < 30, "a run that timed out stops promptly", out)
        check(gone(root / "background.pid"), "a background job is stopped after a timeout")

    with tempfile.TemporaryDirectory() as tmp, socket.socket() as listener:
        root = Path(tmp).resolve()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        page = f"{FENCE}sh\ntouch {root}/ran\nserver --addr 127.0.0.1:{port} &\n{FENCE}\n"
        code, out = run(root, page)
        check(code == 1 and str(port) in out, "a taken port stops the run, named", out)
        check(not (root / "ran").exists(), "a taken port stops the run before any block", out)

    if failures:
        for failure in failures:
            print(f"run-tutorial-test: FAILED: {failure}", file=sys.stderr)
        return 1
    print("run-tutorial-test: the tutorial runner's promises hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
