"""The documentation's generated reference covers the code: every public name of
``gnntrain``, ``partition`` and ``samplers`` has a docstring and a reference entry, every
config field and every command-line option appears, and every generated section of every
page renders (``docs/hooks``; ``make docs`` builds the site itself)."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

DOCS = REPO / "docs"
CLIS = ("gnntrain.run:build_parser", "gnntrain.predict.cli:build_parser", "gnntrain.tune.cli:build_parser",
        "partition.cli:build_parser")


@pytest.fixture(scope="module")
def hooks() -> Iterator[ModuleType]:
    """The site's reference hook, its directory on ``sys.path`` for this module only (a
    directory left there would be handed to every later Ray worker, see
    ``gnntrain.runtime.cluster.driver_code_paths``)."""
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks" / "reference.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(DOCS / "hooks"))


@pytest.mark.parametrize("package", ["gnntrain", "partition", "samplers"])
def test_every_public_name_is_documented_and_in_the_reference(hooks: ModuleType, package: str) -> None:
    page = (DOCS / "reference" / ("api.md" if package == "gnntrain" else f"{package}.md")).read_text()
    assert f"<!-- gen:api {package} -->" in page
    api = hooks.render_api(package)
    names = hooks.public_names(package)
    assert names and all(f"::: {package}.{n}\n" in api for n in names)
    assert hooks.undocumented((package,)) == []


def test_every_config_field_is_in_the_reference(hooks: ModuleType) -> None:
    assert "<!-- gen:config -->" in (DOCS / "reference" / "config.md").read_text()
    text = hooks.render_config()
    fields = hooks.config_fields()
    assert {"train.epochs", "dataset.synthetic.nodes", "sampler.cache.policy",
            "faults.schedule[].rank", "model.node_embedding.dim"} <= set(fields)
    missing = [f for f in fields if f"| `{f}` |" not in text]
    assert missing == []


def test_every_cli_option_is_in_the_reference(hooks: ModuleType) -> None:
    import importlib

    page = (DOCS / "reference" / "cli.md").read_text()
    for target in CLIS:
        assert f"<!-- gen:cli {target} -->" in page
        text = hooks.render_cli(target)
        module, func = target.split(":")
        parser = getattr(importlib.import_module(module), func)()
        for action in parser._actions:
            if action.help != "==SUPPRESS==":
                for flag in action.option_strings or [action.dest]:
                    assert f"`{flag}`" in text, (target, flag)


def test_every_generated_section_renders(hooks: ModuleType) -> None:
    pages = sorted(DOCS.rglob("*.md"))
    markers = [m for p in pages for m in hooks.MARKER.findall(p.read_text())]
    assert {kind for kind, _ in markers} == set(hooks.GENERATORS)
    for page in pages:
        text = page.read_text()
        if hooks.MARKER.search(text) and "gen:api" not in text:  # api blocks are rendered by mkdocstrings
            out = hooks.expand(text)
            assert not hooks.MARKER.search(out), page


def test_every_snippet_names_an_example_that_exists() -> None:
    for page in DOCS.rglob("*.md"):
        for path in re.findall(r'--8<-- "([^"]+)"', page.read_text()):
            assert (REPO / path).is_file(), (page, path)


@pytest.mark.parametrize("page", ["README.md", "bench/RESULTS.md", "CHANGELOG.md"])
def test_relative_links_outside_the_site_resolve(page: str) -> None:
    """README, RESULTS and the changelog are read on their own (the site checks its pages)."""
    path = REPO / page
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text()):
        assert (path.parent / target).exists(), (page, target)


def test_every_tutorial_runs_or_says_why_not() -> None:
    """Every tutorial page marks commands for ``make tutorials`` (docs/check_tutorials.py) or
    names the tests that make its calls instead; every marked replacement still finds its text."""
    spec = importlib.util.spec_from_file_location("check_tutorials", DOCS / "check_tutorials.py")
    assert spec is not None and spec.loader is not None
    checker = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = checker  # its dataclasses look their module up there
    spec.loader.exec_module(checker)
    pages = checker.pages()
    assert len(pages) == len(list((DOCS / "tutorials").glob("*.md")))
    for page in pages:
        assert page.blocks or page.none_reason, f"{page.name}: nothing marked to run and no reason given"
        for block in page.blocks:
            assert block.problems() == [], block.problems()


def test_tutorial_markers_for_files_and_an_s3_server(tmp_path: Path) -> None:
    """``check file: NAME`` writes a block to a file instead of running it; ``check s3:``
    gives a page an S3 server holding its buckets, reached by its unchanged ``s3://`` URIs
    (``{newest:s3://...}`` matched in the store)."""
    spec = importlib.util.spec_from_file_location("check_tutorials", DOCS / "check_tutorials.py")
    assert spec is not None and spec.loader is not None
    checker = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = checker
    spec.loader.exec_module(checker)
    page = tmp_path / "demo.md"
    page.write_text('<!-- check s3: demo-bucket -->\n\n'
                    '<!-- check file: cfg.yaml -->\n<!-- check: "x: 1" -> "x: 2" -->\n```yaml\nx: 1\n```\n\n'
                    '<!-- check -->\n```python\nimport s3fs\n'
                    's3fs.S3FileSystem().pipe_file("demo-bucket/runs/a-2", open("cfg.yaml", "rb").read())\n```\n\n'
                    '<!-- check: "URI" -> "{newest:s3://demo-bucket/runs/a-*}" -->\n```python\n'
                    'assert s3fs.S3FileSystem().cat_file("URI".removeprefix("s3://")) == b"x: 2\\n"\n```\n')
    parsed = checker.parse(page)
    assert parsed.buckets == ["demo-bucket"] and [b.file for b in parsed.blocks] == ["cfg.yaml", None, None]
    assert all(b.problems() == [] for b in parsed.blocks)
    before = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID")}
    assert checker.run_page(parsed)
    assert {k: os.environ.get(k) for k in before} == before  # the page's store settings are gone
    assert checker.run_page(parsed)  # a second page of the same buckets starts from an empty server
