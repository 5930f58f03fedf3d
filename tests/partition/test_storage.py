"""Partition sets on object storage (an S3 server on 127.0.0.1): written in place with the
manifest last, complete or absent, and staged one part at a time with checksums."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from partition import PartitionConfig, build_partition_set, open_partition_set
from partition.errors import PartitionChecksumError, PartitionFormatError
from partition.staging import LAST_USED, stage_part
from partition.storage import (
    FsspecStore,
    LocalStore,
    StorageError,
    is_remote,
    local_path,
    open_store,
    redact,
)
from tests.conftest import make_graph

S3Bucket = tuple[str, dict[str, object]]


def _cfg(root: str | Path, options: dict[str, object] | None = None) -> PartitionConfig:
    return PartitionConfig(parts=2, root=str(root), storage_options=options or {})


def _staged(local: Path) -> set[str]:
    return {str(p.relative_to(local)) for p in local.rglob("*") if p.is_file() and p.name != LAST_USED}


def test_uris_and_redaction() -> None:
    assert is_remote("s3://b/p") and is_remote("gs://b") and is_remote("memory://x")
    assert not is_remote("/data/parts") and not is_remote("parts") and not is_remote("file:///data")
    assert isinstance(open_store("file:///tmp/x"), LocalStore)
    assert local_path("file:///data/parts") == Path("/data/parts") == local_path("/data/parts")
    opts = {"endpoint_url": "http://h:9000", "key": "AKIA", "secret": "s", "anon": False,
            "client_kwargs": {"aws_session_token": "t", "region_name": "r"}, "password": "p"}
    assert redact(opts) == {"endpoint_url": "http://h:9000", "anon": False,
                            "client_kwargs": {"region_name": "r"}}
    assert "key" in opts  # the caller's mapping is left as it is


def test_set_is_written_in_the_store_and_reused(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    uri, options = s3_bucket
    g = make_graph()
    remote = build_partition_set(g, _cfg(f"{uri}/sets", options))
    local = build_partition_set(g, _cfg(tmp_path / "local"))
    assert remote.location.startswith(f"{uri}/sets/") and remote.location.endswith(local.path.name)
    assert not remote.reused
    # the same files, byte for byte, as the set written to a local directory
    assert {r: (e.bytes, e.sha256) for r, e in remote.meta.files.items()} == \
        {r: (e.bytes, e.sha256) for r, e in local.meta.files.items()}
    store = open_store(remote.location, options)
    assert sorted(store.names()) == sorted(["meta.json", "global_degrees.npy", "new_ids.npy",
                                            "orig_ids.npy", "part-0", "part-1"])
    # the coordinator's copy holds the set-level files only, no part
    assert not any(p.name.startswith("part-") for p in remote.path.iterdir())
    again = build_partition_set(g, _cfg(f"{uri}/sets", options))
    assert again.reused and again.meta.meta_sha256 == remote.meta.meta_sha256


def test_an_interrupted_write_leaves_no_set(s3_bucket: S3Bucket) -> None:
    uri, options = s3_bucket
    g, cfg = make_graph(), _cfg(f"{uri}/sets", options)

    written: list[str] = []

    def stop(rel: str) -> None:
        written.append(rel)
        if rel == "part-1/x.npy":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_partition_set(g, cfg, on_write=stop)
    assert any(rel.startswith("part-0/") for rel in written)  # uploaded before the interrupt
    assert open_store(f"{uri}/sets", options).names() == []  # and removed: nothing lingers
    name = build_partition_set(g, cfg).location.rsplit("/", 1)[-1]

    # a set whose build stopped without cleaning up (a killed process): files, no manifest
    store = open_store(f"{uri}/sets/{name}", options)
    store.remove("meta.json")
    with pytest.raises(PartitionFormatError, match="not a partition set"):
        open_partition_set(store.uri, storage_options=options)
    assert not build_partition_set(g, cfg).reused  # built again, not taken for a set


def test_a_worker_stages_only_its_own_part_once(s3_bucket: S3Bucket, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    uri, options = s3_bucket
    pset = build_partition_set(make_graph(), _cfg(f"{uri}/sets", options))
    fetched: list[str] = []
    real_fetch = FsspecStore.fetch

    def counting(self: FsspecStore, rel: str, *args: object) -> None:
        fetched.append(rel)
        real_fetch(self, rel, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(FsspecStore, "fetch", counting)
    staged = stage_part(pset.location, 1, scratch=tmp_path / "scratch", storage_options=options)
    local = staged.path
    own = {r for r in pset.meta.files if not r.startswith("part-") or r.startswith("part-1/")}
    assert sorted(fetched) == sorted(own)  # one GET per file of its own; none of part 0
    # the record says the same: what was copied, its bytes (the manifest's sizes)
    assert (set(staged.fetched), staged.reused, staged.source) == (own, [], pset.location)
    assert staged.fetched_bytes == sum(pset.meta.files[r].bytes for r in own) > 0
    assert _staged(local) == own | {"meta.json"}
    mtimes = {p: p.stat().st_mtime_ns for p in local.rglob("*.npy")}
    fetched.clear()
    time.sleep(0.01)
    again = stage_part(pset.location, 1, scratch=tmp_path / "scratch", storage_options=options)
    assert (again.path, again.fetched, again.fetched_bytes, set(again.reused)) == (local, [], 0, own)
    assert fetched == [] and {p: p.stat().st_mtime_ns for p in local.rglob("*.npy")} == mtimes
    part = open_partition_set(local).load_part(1)  # memory-mapped from the local copy
    assert Path(part.x.filename).is_relative_to(local)  # type: ignore[union-attr]


def test_staging_evicts_the_least_recently_used_sets_beyond_the_limit(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    """``cluster.scratch_max_gb``: before a set is staged, the other staged sets are removed,
    least recently used first, until they fit; never the set being staged, never one used
    in the last minute. Without a limit nothing is removed."""
    uri, options = s3_bucket
    a, b, c = (build_partition_set(make_graph(seed=seed), _cfg(f"{uri}/sets", options)) for seed in (1, 2, 3))
    scratch = tmp_path / "scratch"
    staged = [stage_part(p.location, 0, scratch=scratch, storage_options=options) for p in (a, b, c)]
    now = time.time()
    for s, age in zip(staged, (300, 200, 10), strict=True):  # a used longest ago, c just now
        os.utime(s.path / LAST_USED, (now - age, now - age))
    assert stage_part(a.location, 1, scratch=scratch, storage_options=options).evicted == []  # no limit
    os.utime(staged[0].path / LAST_USED, (now - 300, now - 300))

    # a limit of one byte: a's part 1 is staged after every other set that may go has gone
    more = stage_part(a.location, 1, scratch=scratch, storage_options=options, max_bytes=1)
    assert more.evicted == [staged[1].path.name]  # b; c was used within the minute
    assert sorted(p.name for p in scratch.iterdir()) == sorted([staged[0].path.name, staged[2].path.name])
    assert {"part-0", "part-1"} <= {p.name for p in staged[0].path.iterdir()}
    # b staged again is copied again
    again = stage_part(b.location, 0, scratch=scratch, storage_options=options)
    assert again.path == staged[1].path and again.fetched and not again.reused


def test_staging_refuses_a_damaged_or_missing_object(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    uri, options = s3_bucket
    pset = build_partition_set(make_graph(), _cfg(f"{uri}/sets", options))
    store = open_store(pset.location, options)
    x = store.read_bytes("part-0/x.npy")
    store.write_bytes("part-0/x.npy", x[:-4] + bytes(4 - i for i in range(4)))  # same size
    with pytest.raises(PartitionChecksumError, match=r"s3://.*part-0/x\.npy fails its checksum"):
        stage_part(pset.location, 0, scratch=tmp_path, storage_options=options)
    assert not list(tmp_path.rglob("x.npy*"))  # nothing half-copied is left
    store.write_bytes("part-0/x.npy", x)
    store.remove("part-0/y.npy")
    with pytest.raises(PartitionChecksumError, match=r"part-0/y\.npy is listed in meta.json but missing"):
        stage_part(pset.location, 0, scratch=tmp_path / "b", storage_options=options)
    with pytest.raises(PartitionChecksumError, match="part-0/y.npy is missing"):
        build_partition_set(make_graph(), _cfg(f"{uri}/sets", options))  # the reused set's sizes


def test_store_errors_name_the_uri_never_the_secret(s3_bucket: S3Bucket) -> None:
    uri, options = s3_bucket
    with pytest.raises(PartitionFormatError, match="s3://no-such-bucket/set is not a partition set"):
        open_partition_set("s3://no-such-bucket/set", storage_options=options)
    dead = {**options, "endpoint_url": "http://127.0.0.1:9", "config_kwargs": {
        "retries": {"max_attempts": 1}, "connect_timeout": 1}}
    with pytest.raises(StorageError) as err:
        open_store(f"{uri}/set", dead).read_bytes("meta.json")
    msg = str(err.value)
    assert f"{uri}/set/meta.json" in msg and "endpoint" in msg
    assert str(options["secret"]) not in msg and str(options["key"]) not in msg
    assert "secret" not in json.dumps(redact(dead))


def test_a_file_uri_root_is_a_local_directory(tmp_path: Path) -> None:
    pset = build_partition_set(make_graph(), _cfg(f"file://{tmp_path}"))
    assert pset.remote is None and pset.path.parent == tmp_path
    assert open_partition_set(f"file://{pset.path}").meta.meta_sha256 == pset.meta.meta_sha256
