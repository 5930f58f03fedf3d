"""Markdown tables from a benchmark's JSON (what ``python -m bench.<name>`` wrote to
``bench/out/``, copied to ``docs/benchmarks/data/``), so a benchmark page shows its run's
figures and nothing else. One renderer per benchmark, picked by the file name's prefix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def machine_line(data: dict[str, Any]) -> str:
    m = data.get("machine", {})
    gpu = "GPU" if m.get("gpu") else "no GPU"
    load = [x for x in (m.get("loadavg_1m"), data.get("loadavg_after")) if isinstance(x, int | float)]
    return (f"Machine: {m.get('cpus')} cores ({m.get('cpu_model')}), {m.get('mem_gib')} GiB, {gpu}; "
            f"Python {m.get('python')}, torch {m.get('torch')}; load average "
            + " to ".join(f"{x:.1f}" for x in load) + " (before and after the run).")


def command_line(module: str, data: dict[str, Any]) -> str:
    return f"`python -m bench.{module} {' '.join(data.get('argv', []))}`".replace(" `", "`")


def _spread(s: dict[str, Any], scale: float = 1.0, digits: int = 3) -> str:
    return (f"{scale * s['mean']:.{digits}f} ± {scale * s['std']:.{digits}f} "
            f"({scale * s['min']:.{digits}f}–{scale * s['max']:.{digits}f})")


def link_recipe(data: dict[str, Any]) -> list[str]:
    out = [command_line("link_recipe", data), "", machine_line(data), ""]
    for ds in data["datasets"]:
        variant = "; ".join(ds.get("variant") or []) or "as shipped"
        out += [f"**{ds['dataset']}** (`datasets/{ds['config']}`, {variant}): test Hits@50 and AUC at "
                "the best validation epoch, mean ± std (min–max) over seeds; gap to the reference "
                "in points ± its standard error; collapse floor: the lowest later epoch's Hits@50 "
                "as a share of the best.", "",
                "| run | seeds | test Hits@50 | test AUC | Hits@50 gap | AUC gap | collapse floor |",
                "|---|---|---|---|---|---|---|"]
        for label, s in ds["summary"].items():
            hits_gap = (f"{s['hits_gap_points']:+.1f} ± {s['hits_gap_standard_error_points']:.1f}"
                        if "hits_gap_points" in s else "")
            auc_gap = f"{s['auc_gap_points']:+.2f}" if "auc_gap_points" in s else ""
            floor = f"{s['collapse_floor_min']:.2f}" if "collapse_floor_min" in s else ""
            out.append(f"| {label} | {s['hits']['n']} | {_spread(s['hits'])} | {_spread(s['auc'])} | "
                       f"{hits_gap} | {auc_gap} | {floor} |")
        out.append("")
    return out


def typed(data: dict[str, Any]) -> list[str]:
    out = [command_line("typed", data), "", machine_line(data), ""]
    for ds in data.get("seeds", []):
        out += [f"**{ds['dataset']}**: test accuracy (%) at the best validation epoch, mean ± std "
                "(min–max) over seeds; gap in points ± its standard error, of a one-process run to "
                "the reference and of a worker run to its one-process run.", "",
                "| run | seeds | test accuracy | gap |", "|---|---|---|---|"]
        for label, s in ds["summary"].items():
            key = next((k for k in ("gap_to_reference_points", "gap_to_one_process_points") if k in s), None)
            gap = f"{s[key]:+.1f} ± {s['gap_standard_error_points']:.1f}" if key else ""
            out.append(f"| {label} | {s['n']} | {_spread(s, digits=1)} | {gap} |")
        out.append("")
    return out


def faults(data: dict[str, Any]) -> list[str]:
    out = [command_line("faults", data), "", machine_line(data), "",
           f"Undisturbed reference run: {data['reference_s']:.1f} s.", "",
           "| scenario | finished | failures | detected after (s) | recovery (s) | blamed rank | "
           "ranks started anew | state equals the undisturbed run's |",
           "|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        secs = ", ".join(f"{x:.1f}" for x in r.get("recovery_s", []))
        detect = ", ".join(f"{x:.1f}" for x in r.get("detect_s", []))
        anew = "; ".join(", ".join(str(k) for k in ranks) if ranks is not None else "-"
                         for ranks in r.get("restarted") or []) or "-"
        out.append(f"| {r['scenario']} | {'yes' if r['finished'] else 'no'} | {r['failures']} | {detect} | "
                   f"{secs} | {', '.join(str(b) for b in r.get('blamed', []))} | {anew} | "
                   f"{'yes' if r['correct'] else 'no'} |")
    runs = ", ".join(f"{k}: {a}/{b}" for k, (a, b) in data.get("identical", {}).items())
    out += ["", f"Bit-identical recoveries per scenario: {runs}.", ""]
    return out


def storage(data: dict[str, Any]) -> list[str]:
    mib = 2 ** 20
    out = [command_line("storage", data), "", machine_line(data), "",
           "| worker | copied from the store | its own part's files | set-level files copied | staging "
           "(of which opening the store) |",
           "|---|---|---|---|---|"]
    for w in data["workers"]:
        out.append(f"| {w['rank']} | {w['fetched_bytes'] / mib:.2f} MiB | {w['own_part_bytes'] / mib:.2f} MiB | "
                   f"{w['set_level_fetched']} | {w['seconds']:.2f} s ({w['open_seconds']:.2f} s) |")
    c, t, e = data["coordinator"], data["throughput"], data["epoch"]
    out += ["", f"Coordinator: {c['fetched_bytes'] / mib:.2f} MiB of set-level files copied, "
            f"{c['part_bytes']} bytes of parts. The whole set: {data['set_bytes'] / mib:.1f} MiB.", "",
            "| measure | s3 | baseline | ratio |", "|---|---|---|---|",
            f"| staging throughput (the workers' copies, the slower worker's wall time) | "
            f"{t['staged_bytes'] / mib:.1f} MiB in {t['staging_s']:.2f} s | plain s3fs `get` of the same files "
            f"in a new process: {t['plain_get_s']:.2f} s | {t['ratio']:.2f}x |",
            f"| the same, copying alone (no store opening) | {t['copy_s']:.2f} s | {t['plain_get_copy_s']:.2f} s | "
            f"{t['copy_ratio']:.2f}x |",
            f"| epoch time from the second epoch, empty scratch | {e['s3_s']:.2f} s | local directory: "
            f"{e['local_s']:.2f} s | {e['ratio']:.2f}x |",
            f"| the same, staged copies reused | {e['s3_again_s']:.2f} s | {e['local_s']:.2f} s | "
            f"{e['ratio_again']:.2f}x |", ""]
    return out


RENDERERS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "link_recipe": link_recipe, "typed": typed, "faults": faults, "storage": storage}


def render_bench(path: Path) -> str:
    """The tables of one benchmark JSON; the renderer is the file name's prefix
    (``link_recipe-grqc.json`` -> ``link_recipe``)."""
    prefix = path.stem.split("-")[0]
    if prefix not in RENDERERS:
        raise ValueError(f"{path.name}: no table renderer for benchmark {prefix!r}; "
                         f"known: {sorted(RENDERERS)}")
    data = json.loads(path.read_text())
    checks = data.get("checks", [])
    failed = [c["name"] for c in checks if not c.get("ok")]
    lines = RENDERERS[prefix](data)
    lines.append(f"Checks: {len(checks) - len(failed)} of {len(checks)} passed"
                 + (f"; failed: {', '.join(failed)}." if failed else ".") + f" Data: `{path.name}`.")
    return "\n".join(lines)
