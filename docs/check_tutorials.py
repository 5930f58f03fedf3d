"""Run the tutorials' commands: every fenced ``bash`` or ``python`` block of
``docs/tutorials/*.md`` that an HTML comment marks (invisible on the site), in page order.

    python docs/check_tutorials.py                 # every page (make tutorials; CI runs it)
    python docs/check_tutorials.py typed-graphs    # some pages
    python docs/check_tutorials.py --list          # what would run, nothing run

Markers, each in a comment on the line(s) right above its block:

``<!-- check -->``
    run the block as written;
``<!-- check: "OLD" -> "NEW"; ... -->``
    run it with each ``OLD`` text replaced by ``NEW`` (smoke sizes: fewer epochs or
    samples); in ``NEW``, ``{newest:GLOB}`` becomes the newest path matching ``GLOB`` in
    the page's working directory when the block runs (the run a tutorial calls
    ``runs/cora-20261130-091500``);
``<!-- check setup: COMMAND -->``
    run the shell ``COMMAND`` first (a file the block reads, such as ``pairs.csv``);
``<!-- check file: NAME -->``
    write the block (any language: a YAML config the page's commands read) to the file
    ``NAME`` of the page's working directory instead of running it.

A page with nothing that can run here says why at its top: ``<!-- check: none: REASON -->``
(REASON names the test that runs the same calls instead). A page whose commands read and
write object storage says at its top ``<!-- check s3: BUCKET ... -->``: it runs beside an
S3 server on 127.0.0.1 (:func:`bench.harness.s3.s3_server`) holding those empty buckets,
with ``AWS_ENDPOINT_URL`` and dummy credentials in its environment, so that its
``s3://BUCKET/...`` URIs reach that server unchanged; ``{newest:GLOB}`` then also takes
an ``s3://`` glob (the last match by name: run names end in their time stamp).

Each page runs in a new temporary directory holding links to the repository's
``datasets/`` and ``examples/``, with this Python first on ``PATH`` and the repository on
``PYTHONPATH``; a ``bash`` block runs under ``bash -euo pipefail``, a ``python`` block in a
new interpreter, after the ``import`` lines of the page's earlier python blocks. Every
block's command, wall time and last output lines are printed; the exit status is 1 when a
block failed or a replacement's ``OLD`` text is missing from its block.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
TUTORIALS = REPO / "docs" / "tutorials"
BLOCK_TIMEOUT_S = 900

_MARK = re.compile(r"<!--\s*check(?P<setup>\s+setup)?(?P<file>\s+file)?(?::(?P<arg>.*?))?\s*-->", re.S)
_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
_PAIR = re.compile(r'"((?:[^"\\]|\\.)*)"\s*->\s*"((?:[^"\\]|\\.)*)"')
_NEWEST = re.compile(r"\{newest:([^}]+)\}")
_S3 = re.compile(r"<!--\s*check\s+s3:\s*(.*?)\s*-->", re.S)


@dataclass
class Block:
    """One marked block of a page."""

    page: str
    lang: str
    code: str
    line: int
    replace: list[tuple[str, str]] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    file: str | None = None

    def problems(self) -> list[str]:
        """Replacements whose OLD text the block no longer holds; a language we cannot run."""
        out = [f"{self.page}:{self.line}: replacement {old!r} not in the block" for old, _ in self.replace
               if old not in self.code]
        if self.file is None and self.lang not in ("bash", "python"):
            out.append(f"{self.page}:{self.line}: a ```{self.lang} block cannot be run")
        return out


@dataclass
class Page:
    name: str
    blocks: list[Block]
    none_reason: str | None = None
    buckets: list[str] = field(default_factory=list)


def parse(path: Path) -> Page:
    """The marked blocks of a tutorial page (and its ``none`` reason, if any)."""
    text = path.read_text()
    name = path.stem
    none = re.search(r"<!--\s*check:\s*none:\s*(.*?)\s*-->", text, re.S)
    s3 = _S3.search(text)
    blocks: list[Block] = []
    for fence in _FENCE.finditer(text):
        before = text[:fence.start()].rstrip("\n")
        marks: list[re.Match[str]] = []
        while (m := _MARK.search(before, max(0, before.rfind("<!--")))) and m.end() == len(before):
            marks.insert(0, m)
            before = before[:m.start()].rstrip("\n")
        if not marks or any((m.group("arg") or "").strip().startswith("none:") for m in marks):
            continue
        block = Block(name, fence.group(1), fence.group(2), text[:fence.start()].count("\n") + 1)
        for m in marks:
            arg = (m.group("arg") or "").strip()
            if m.group("setup"):
                block.setup.append(arg)
            elif m.group("file"):
                block.file = arg
            elif arg:
                pairs = _PAIR.findall(arg)
                if not pairs:
                    raise ValueError(f"{name}:{block.line}: cannot read the check marker {m.group(0)!r}")
                block.replace += [(old.replace('\\"', '"'), new.replace('\\"', '"')) for old, new in pairs]
        blocks.append(block)
    return Page(name, blocks, none.group(1) if none else None, s3.group(1).split() if s3 else [])


def _expand(text: str, cwd: Path, lang: str) -> str:
    """``text`` with every ``{newest:GLOB}`` resolved: in a bash block by the shell when the
    line runs (the block itself may make the path), in a python block now."""
    def newest(m: re.Match[str]) -> str:
        if "://" in m.group(1):  # in a store: matched now (the blocks before have run)
            import fsspec

            fs, _ = fsspec.core.url_to_fs(m.group(1), skip_instance_cache=True)  # this page's server
            hits = sorted(fs.glob(m.group(1)))
            if not hits:
                raise FileNotFoundError(f"nothing matches {m.group(1)!r} in the store")
            return f"{m.group(1).split('://', 1)[0]}://{hits[-1]}"
        if lang == "bash":
            return f'"$(ls -1dt {m.group(1)} | head -n 1)"'
        found = sorted(glob.glob(m.group(1), root_dir=cwd), key=lambda p: (cwd / p).stat().st_mtime)
        if not found:
            raise FileNotFoundError(f"nothing matches {m.group(1)!r} in the page's directory")
        return found[-1]
    return _NEWEST.sub(newest, text)


def _tail(out: str, lines: int = 6) -> str:
    return "\n".join("    " + ln for ln in out.rstrip().splitlines()[-lines:])


def run_page(page: Page) -> bool:
    """Run a page's blocks in order in a new directory (beside an S3 server when the page
    names buckets); True when every one succeeded."""
    if not page.buckets:
        return _run_blocks(page, {})
    sys.path.insert(0, str(REPO))
    from bench.harness.s3 import new_bucket, s3_server

    with s3_server() as endpoint:
        for bucket in page.buckets:
            new_bucket(endpoint, bucket)
        store_env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "tutorial-key-id",
                     "AWS_SECRET_ACCESS_KEY": "tutorial-secret"}
        with mock.patch.dict(os.environ, store_env):  # {newest:s3://...} is matched in this process
            return _run_blocks(page, store_env)


def _run_blocks(page: Page, extra_env: dict[str, str]) -> bool:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1", **extra_env}
    imports: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"tutorial-{page.name}-") as tmp:
        cwd = Path(tmp)
        for link in ("datasets", "examples"):
            (cwd / link).symlink_to(REPO / link)
        for b in page.blocks:
            for cmd in b.setup:
                print(f"--- {page.name}:{b.line} setup\n    $ {cmd}")
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=cwd, env=env,
                                      capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
                if done.returncode != 0:
                    print(f"FAILED {page.name}:{b.line} setup:\n{_tail(done.stdout + done.stderr, 40)}")
                    return False
            try:
                code = b.code
                for old, new in b.replace:
                    code = code.replace(old, _expand(new, cwd, b.lang))
            except FileNotFoundError as e:
                print(f"FAILED {page.name}:{b.line}: {e}")
                return False
            if b.file is not None:
                print(f"--- {page.name}:{b.line} ({b.lang}) written to {b.file}")
                (cwd / b.file).write_text(code)
                continue
            if b.lang == "python":
                argv = [sys.executable, "-c", "\n".join(imports) + "\n" + code]
                imports += [ln for ln in b.code.splitlines() if ln.startswith(("import ", "from "))]
            else:
                argv = ["bash", "-euo", "pipefail", "-c", code]
            print(f"--- {page.name}:{b.line} ({b.lang})\n" + "\n".join("    $ " + ln for ln in code.strip().splitlines()))
            t0 = time.monotonic()
            try:
                done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                      timeout=BLOCK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                print(f"FAILED {page.name}:{b.line}: no end within {BLOCK_TIMEOUT_S} s")
                return False
            out = done.stdout + done.stderr
            print(f"    ({time.monotonic() - t0:.0f} s, exit {done.returncode})\n{_tail(out)}")
            if done.returncode != 0:
                print(f"FAILED {page.name}:{b.line}:\n{_tail(out, 40)}")
                return False
    return True


def pages(names: list[str] | None = None) -> list[Page]:
    paths = sorted(TUTORIALS.glob("*.md"))
    if names:
        paths = [TUTORIALS / f"{n}.md" for n in names]
    return [parse(p) for p in paths]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", help="page names (default: every tutorial)")
    ap.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    args = ap.parse_args(argv)
    todo = pages(args.pages)
    problems = [p for page in todo for b in page.blocks for p in b.problems()]
    problems += [f"{page.name}: no block marked to run and no reason given" for page in todo
                 if not page.blocks and page.none_reason is None]
    for p in problems:
        print(f"FAILED {p}")
    if args.list or problems:
        for page in todo:
            what = f"not run: {page.none_reason}" if not page.blocks else f"{len(page.blocks)} block(s)"
            print(f"{page.name}: {what}")
        return 1 if problems else 0
    failed = []
    for page in todo:
        if not page.blocks:
            print(f"--- {page.name}: not run here: {page.none_reason}")
            continue
        t0 = time.monotonic()
        if not run_page(page):
            failed.append(page.name)
        print(f"=== {page.name}: {'FAILED' if page.name in failed else 'ok'} ({time.monotonic() - t0:.0f} s)")
    ran = sum(1 for p in todo if p.blocks)
    print(f"tutorials: {ran - len(failed)} of {ran} pages ran to the end"
          + (f"; failed: {', '.join(failed)}" if failed else "")
          + f"; {len(todo) - ran} with nothing to run here")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

