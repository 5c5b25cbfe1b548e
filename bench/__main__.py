"""`make bench`: run every benchmark module and write one JSON file each."""

from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import sys
import time

# Each module defines `run(quick: bool) -> dict` (JSON-serialisable results).
BENCH_MODULES: list[str] = [
    "bench.slom",
    "bench.drivers",
    "bench.design",
    "bench.trajectories",
    "bench.gravity",
    "bench.twin_misfit",
    "bench.forecast",
]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--only", nargs="*", help="run only these benchmark modules (short names)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in BENCH_MODULES:
        short = name.rsplit(".", 1)[-1]
        if args.only and short not in args.only:
            continue
        print(f"== {short}", flush=True)
        t0 = time.perf_counter()
        result = importlib.import_module(name).run(quick=args.quick)
        result.setdefault("wall_total_s", time.perf_counter() - t0)
        path = out / f"{short}.json"
        path.write_text(json.dumps(result, indent=2, default=float))
        print(f"   wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
