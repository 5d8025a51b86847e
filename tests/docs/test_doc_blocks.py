"""Run the code blocks of README.md and every page under docs/, so that no page can go stale.

The convention (also stated in docs/index.md, "How the examples are tested"):

- A ```` ```console ```` block is run: each line starting with ``$ `` is a shell command (a line ending
  in ``\\`` continues it); the block runs as one bash script with ``set -e`` (120 s per command) and must
  exit 0. Other lines are sample output for the reader and are not compared. A ```` ```console fails ````
  block must exit non-zero (for documenting error messages).
- A ```` ```python ```` block is run with the project's Python in the page's working directory and must
  exit 0.
- A block directly preceded by ``<!-- file: NAME -->`` is not run: its content is written to NAME in the
  working directory, for later blocks to use.
- A block directly preceded by ``<!-- not-run: REASON -->`` is skipped; the reason is required.
- Blocks in any other language are not run (unless given a ``file:`` marker).
- A page whose first line is ``<!-- doc-test: slow -->`` runs only under ``make test-slow``;
  ``<!-- doc-test: ladder -->`` (or ``slow, ladder``) starts the page's server with a small ladder on
  (``LADDER`` below: 100-round RPS among rock, rotate, beat-last and random, unpaced);
  ``<!-- doc-test: ray -->`` runs the page's commands with ``RAY_ADDRESS`` (and the token) of the test run's
  shared Ray head (``tests/ray_support.py``), so that its ``--ray`` examples join it instead of each starting
  a local cluster.

Every page gets a fresh temporary working directory and its own real ``arena serve`` on a free port
(started only when the page has something to run); ``ARENA_SERVER`` holds its address and the
virtualenv's bin directory comes first on ``PATH``. Blocks run in page order.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ray_support import RayHead

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMMAND_TIMEOUT = 120.0
SERVER_START_TIMEOUT = 60.0
# A page flagged `ladder` gets a small, quick ladder (docs/ladder.md shows this command).
LADDER = ["--ladder-game", "rps:rounds=100", "--ladder-bots", "rock,rotate,beat-last,random", "--ladder-interval", "0"]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>file|not-run)\s*:\s*(?P<value>.*?)\s*-->\s*$")
_PAGE_FLAGS = re.compile(r"^\s*<!--\s*doc-test\s*:\s*(?P<flags>.*?)\s*-->\s*$")
_RUN_LANGUAGES = {"console", "python"}


class DocFormatError(ValueError):
    """A page breaks the convention (unclosed fence, marker without a name or reason)."""


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    line: int  # 1-based line of the opening fence
    language: str  # first word of the info string, lowercase ("" when none)
    fails: bool  # info string "console fails"
    text: str  # the content, fence indentation removed
    file: str | None = None  # <!-- file: NAME -->
    not_run: str | None = None  # <!-- not-run: REASON -->

    @property
    def runs(self) -> bool:
        return self.file is None and self.not_run is None and self.language in _RUN_LANGUAGES


@dataclass(frozen=True)
class Page:
    """A parsed page: its blocks and the flags of its first line."""

    path: str
    blocks: tuple[Block, ...]
    flags: frozenset[str]

    @property
    def needs_server(self) -> bool:
        return any(block.runs for block in self.blocks)


def parse_page(text: str, path: str = "<page>") -> Page:
    """Split a Markdown page into its fenced blocks, with the marker directly above each one.

    Raises:
        DocFormatError: a fence is never closed, or a marker lacks its file name or reason.
    """
    lines = text.splitlines()
    flags: frozenset[str] = frozenset()
    if lines and (m := _PAGE_FLAGS.match(lines[0])):
        flags = frozenset(f for f in re.split(r"[,\s]+", m.group("flags").lower()) if f)
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start, indent, fence = i, m.group("indent"), m.group("fence")
        info = m.group("info").strip().lower().split()
        body: list[str] = []
        i += 1
        while i < len(lines):
            close = _FENCE.match(lines[i])
            if (
                close
                and close.group("fence")[0] == fence[0]
                and len(close.group("fence")) >= len(fence)
                and not close.group("info").strip()
            ):
                break
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        else:
            raise DocFormatError(f"{path}:{start + 1}: the code block opened here is never closed")
        i += 1
        file = not_run = None
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and (mk := _MARKER.match(lines[j])):
            if not mk.group("value"):
                what = "a file name" if mk.group("kind") == "file" else "a reason"
                raise DocFormatError(f"{path}:{j + 1}: the {mk.group('kind')} marker needs {what}")
            if mk.group("kind") == "file":
                file = mk.group("value")
            else:
                not_run = mk.group("value")
        language = info[0] if info else ""
        blocks.append(
            Block(
                line=start + 1,
                language=language,
                fails=language == "console" and info[1:2] == ["fails"],
                text="\n".join(body) + ("\n" if body else ""),
                file=file,
                not_run=not_run,
            )
        )
    return Page(path, tuple(blocks), flags)


def console_commands(text: str) -> list[str]:
    """The ``$ `` commands of a console block, continuation lines joined."""
    commands: list[str] = []
    pending: str | None = None
    for line in text.splitlines():
        if pending is not None:
            pending += "\n" + line
            if not line.rstrip().endswith("\\"):
                commands.append(pending)
                pending = None
            continue
        if line.startswith("$ "):
            command = line[2:]
            if command.rstrip().endswith("\\"):
                pending = command
            else:
                commands.append(command)
    if pending is not None:
        commands.append(pending)
    return commands


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def _environment(server: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONPATH", None)
    if server is not None:
        env["ARENA_SERVER"] = server
    return env


@functools.cache
def _serve_help() -> str:
    return subprocess.run([str(BIN / "arena"), "serve", "--help"], capture_output=True, text=True, timeout=60).stdout


@contextmanager
def page_server(tmp: Path, ladder: bool) -> Iterator[str]:
    """A real ``arena serve`` on a free port with its own database; yields ``127.0.0.1:PORT``."""
    data = tmp / "server"
    data.mkdir()
    command = [str(BIN / "arena"), "serve", "--host", "127.0.0.1", "--port", "0", "--db", str(data / "arena.db")]
    command += LADDER if ladder else ["--no-ladder"]
    if "--no-http" in _serve_help():  # the web UI's port, once the server has one
        command.append("--no-http")
    log = data / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=data, stdout=out, stderr=subprocess.STDOUT, env=_environment(None))
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        address = None
        while address is None:
            found = re.search(r"serving on [^\s:]+:(\d+)", log.read_text())
            if found:
                address = f"127.0.0.1:{found.group(1)}"
            elif proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the page's server did not start: {' '.join(command)}\n{log.read_text()}")
            else:
                time.sleep(0.05)
        yield address
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _describe(path: str, block: Block, what: str, result: subprocess.CompletedProcess[str]) -> str:
    return (
        f"{path}:{block.line}: {what} (exit status {result.returncode})\n"
        f"--- stdout (end) ---\n{result.stdout[-3000:]}\n--- stderr (end) ---\n{result.stderr[-3000:]}"
    )


def run_block(path: str, block: Block, cwd: Path, env: dict[str, str]) -> None:
    """Run one runnable block in ``cwd``; raise AssertionError with what went wrong."""
    if block.language == "python":
        script = cwd / f".doc-block-{block.line}.py"
        script.write_text(block.text)
        try:
            result = subprocess.run(
                [sys.executable, script.name],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
            )
        finally:
            script.unlink()
        assert result.returncode == 0, _describe(path, block, "the python block failed", result)
        return
    commands = console_commands(block.text)
    assert commands, f"{path}:{block.line}: a console block without any `$ ` command"
    script_text = "set -e\n" + "\n".join(commands) + "\n"
    try:
        result = subprocess.run(
            ["bash", "-c", script_text],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT * len(commands),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{path}:{block.line}: timed out: {commands}") from None
    if block.fails:
        assert result.returncode != 0, _describe(path, block, "a `console fails` block succeeded", result)
    else:
        assert result.returncode == 0, _describe(path, block, f"a command failed: {commands}", result)


def run_page(page: Page, tmp: Path, serve: bool = True, ray: RayHead | None = None) -> int:
    """Run a page's blocks in order in a fresh directory under ``tmp``; return how many ran.

    Args:
        page: the parsed page.
        tmp: an empty directory for the page's working directory and server.
        serve: start the page's server when it has blocks to run (off for the harness's own checks).
        ray: a Ray head for the page's commands to join (``RAY_ADDRESS``), for a page flagged ``ray``.
    """
    cwd = tmp / "page"
    cwd.mkdir()
    ran = 0

    def run_all(server: str | None) -> None:
        nonlocal ran
        env = _environment(server)
        if ray is not None:
            env = ray.environment(env)
        for block in page.blocks:
            if block.file is not None:
                target = cwd / block.file
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text)
            elif block.runs:
                run_block(page.path, block, cwd, env)
                ran += 1

    if serve and page.needs_server:
        with page_server(tmp, ladder="ladder" in page.flags) as address:
            run_all(address)
    else:
        run_all(None)
    return ran


def _params() -> list[object]:
    params: list[object] = []
    for path in pages():
        name = str(path.relative_to(ROOT))
        first = path.read_text().split("\n", 1)[0]
        flags = _PAGE_FLAGS.match(first)
        named = set(re.split(r"[,\s]+", flags.group("flags").lower())) if flags is not None else set()
        marks = [mark for flag, mark in (("slow", pytest.mark.slow), ("ray", pytest.mark.ray_head)) if flag in named]
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", _params())
def test_page_blocks_run(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Every runnable block of the page exits as documented, against the page's own server."""
    page = parse_page((ROOT / name).read_text(), name)
    run_page(page, tmp_path, ray=request.getfixturevalue("ray_head") if "ray" in page.flags else None)


# The harness itself: each check below can fail, so a broken harness cannot pass every page silently.

SAMPLE = """<!-- doc-test: slow, ladder -->
# Sample

<!-- file: hello.txt -->
```text
hello
```

```console
$ test "$(cat hello.txt)" = hello
$ echo one \\
    two
one two
```

<!-- not-run: it would wait forever -->
```console
$ sleep 1000
```

```console fails
$ false
```

- a list item
  ```python
  print("indented")
  ```
"""


def test_parser_reads_markers_flags_and_indented_blocks() -> None:
    page = parse_page(SAMPLE)
    assert page.flags == {"slow", "ladder"}
    kinds = [(b.language, b.fails, b.file, b.not_run, b.runs) for b in page.blocks]
    assert kinds == [
        ("text", False, "hello.txt", None, False),
        ("console", False, None, None, True),
        ("console", False, None, "it would wait forever", False),
        ("console", True, None, None, True),
        ("python", False, None, None, True),
    ]
    assert page.blocks[4].text == 'print("indented")\n'
    assert console_commands(page.blocks[1].text) == ['test "$(cat hello.txt)" = hello', "echo one \\\n    two"]


def test_parser_refuses_a_not_run_marker_without_reason() -> None:
    with pytest.raises(DocFormatError, match="needs a reason"):
        parse_page("<!-- not-run: -->\n```console\n$ true\n```\n")
    with pytest.raises(DocFormatError, match="never closed"):
        parse_page("```console\n$ true\n")


def test_runner_writes_files_runs_blocks_and_catches_failures(tmp_path: Path) -> None:
    page = parse_page(SAMPLE.replace("<!-- doc-test: slow, ladder -->", ""))
    (tmp_path / "a").mkdir()
    assert run_page(page, tmp_path / "a", serve=False) == 3
    broken = parse_page("```console\n$ true\n$ exit 3\n$ true\n```\n")
    (tmp_path / "b").mkdir()
    with pytest.raises(AssertionError, match="a command failed"):
        run_page(Page(broken.path, broken.blocks, frozenset()), tmp_path / "b", serve=False)
    succeeding = parse_page("```console fails\n$ true\n```\n")
    (tmp_path / "c").mkdir()
    with pytest.raises(AssertionError, match="succeeded"):
        run_page(succeeding, tmp_path / "c", serve=False)
    bad_python = parse_page("```python\nraise SystemExit(4)\n```\n")
    (tmp_path / "d").mkdir()
    with pytest.raises(AssertionError, match="python block failed"):
        run_page(bad_python, tmp_path / "d", serve=False)


def test_runner_hands_a_ray_page_the_heads_address(tmp_path: Path) -> None:
    """A page flagged ``ray`` runs with the head's RAY_ADDRESS and token (here a head that is only named)."""
    head = RayHead("127.0.0.1:1", 2, tmp_path, "0123abcd", 0)
    page = parse_page('```console\n$ test "$RAY_ADDRESS,$RAY_AUTH_TOKEN" = 127.0.0.1:1,0123abcd\n```\n')
    (tmp_path / "a").mkdir()
    assert run_page(page, tmp_path / "a", serve=False, ray=head) == 1
    (tmp_path / "b").mkdir()
    with pytest.raises(AssertionError, match="a command failed"):
        run_page(page, tmp_path / "b", serve=False, ray=RayHead("127.0.0.1:2", 2, tmp_path, "0123abcd", 0))


# Links between pages: a relative link must name an existing file, and its #anchor a heading there.

# Pages other helpers write, linked before they arrive; the lead empties this once they are merged.
PENDING_PAGES: set[str] = set()
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    in_code = False
    anchors = set()
    for line in path.read_text().splitlines():
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
    return anchors


def broken_links(path: Path) -> list[str]:
    """The relative links of a page whose file or heading does not exist."""
    broken = []
    in_code = False
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if _FENCE.match(line):
            in_code = not in_code
        if in_code:
            continue
        for match in _LINK.finditer(line):
            target = match.group("target")
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            relative = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(resolved)
            if relative in PENDING_PAGES:
                continue
            if not resolved.exists():
                broken.append(f"{name}:{number}: {target}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{name}:{number}: {target}: no heading #{anchor} there")
    return broken


def test_links_between_pages_resolve() -> None:
    broken = [problem for page in pages() for problem in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_link_checker_reports_a_missing_file_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n")
    sample = tmp_path / "page.md"
    sample.write_text(
        "[ok](other.md#a-section) [gone](missing.md) [bad](other.md#nowhere) [web](https://example.org/x)\n"
        "```text\n[in code](ignored.md)\n```\n"
    )
    problems = broken_links(sample)
    assert len(problems) == 2, problems
    assert "missing.md: no such file" in problems[0]
    assert "no heading #nowhere" in problems[1]
    page = ROOT / "docs" / "index.md"
    assert "#how-the-examples-are-tested" in {"#" + a for a in _anchors(page)}
    assert _slug("Five minutes: your first bot in Python") == "five-minutes-your-first-bot-in-python"
    assert _slug("Framing 1: JSON lines (`--framing json`)") == "framing-1-json-lines---framing-json"
