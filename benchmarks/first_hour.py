"""Benchmark: how fast a new user gets an answer (issue 11), measured through the real CLI.

    .venv/bin/python benchmarks/first_hour.py            # bad-input answers, cold and warm `fanout run`
    .venv/bin/python benchmarks/first_hour.py --setup    # also a second ./setup.sh --fail ... run
    .venv/bin/python benchmarks/first_hour.py --json     # the figures as one JSON object

Each figure is the wall time of a subprocess (median of --repeat runs for the fast ones). "cold" runs
`fanout run` with the synth cache emptied (.fanout-cache is removed first: it is only a cache);
"warm" runs it again with the cache in place. --setup runs ./setup.sh twice (pip and npm are
skipped on the second run when requirements*, constraints.txt and package*.json are unchanged)
and times the second: setup check + the demo batch with a permanent failure (Retry waits slept).
Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FANOUT = [sys.executable, "-m", "fanout_kit"]
BAD_INPUTS = {
    "input a top-level array": ["run", "{dir}/array.json"],
    "batchId a number": ["run", "{dir}/number.json"],
    "input over 256 KiB": ["run", "{dir}/big.json"],
    "--env unknown": ["run", "examples/batch.json", "--env", "nope"],
    "--fail-item on the Parallel workflow": ["run", "examples/batch.json", "--fail-item", "3=fatal"],
}


def timed(argv: list[str]) -> tuple[float, int, str]:
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return time.monotonic() - started, done.returncode, last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--setup", action="store_true", help="also time a second ./setup.sh --fail run")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, object] = {}

    example = json.loads((ROOT / "examples" / "batch.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "array.json").write_text(json.dumps([example]))
        Path(tmp, "number.json").write_text(json.dumps({**example, "batchId": 12345}))
        tasks = {**example["tasks"], "ReserveInventory": {"pad": "x" * 300_000}}
        Path(tmp, "big.json").write_text(json.dumps({**example, "tasks": tasks}))
        bad = {}
        for name, argv in BAD_INPUTS.items():
            runs = [timed(FANOUT + [a.format(dir=tmp) for a in argv]) for _ in range(args.repeat)]
            bad[name] = {"seconds": round(statistics.median(r[0] for r in runs), 3),
                         "exit": runs[0][1], "says": runs[0][2]}
        figures["bad_input_answer"] = bad

    shutil.rmtree(ROOT / ".fanout-cache", ignore_errors=True)
    demo = FANOUT + ["run", "examples/batch.json", "--no-sleep"]
    cold, code_cold, _ = timed(demo)
    warm = [timed(demo) for _ in range(3)]
    figures["fanout_run_no_sleep"] = {
        "cold_synth_seconds": round(cold, 2),
        "cached_synth_seconds_median": round(statistics.median(w[0] for w in warm), 2),
        "exit": [code_cold, *[w[1] for w in warm]],
    }
    if args.setup:
        setup = [str(ROOT / "setup.sh"), "--fail", "NotifyCustomer=permanent"]
        first, _, _ = timed(setup)
        second, code, _ = timed(setup)
        check, _, _ = timed([str(ROOT / "setup.sh"), "--no-demo"])
        figures["setup_sh"] = {
            "first_seconds": round(first, 2),
            "second_seconds_with_demo": round(second, 2),
            "second_exit": code,
            "setup_only_no_demo_seconds": round(check, 2),
        }

    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    for name, figure in figures["bad_input_answer"].items():
        print(f"bad input answered in {figure['seconds']:.2f}s (exit {figure['exit']}): {name}")
    run = figures["fanout_run_no_sleep"]
    print(f"fanout run --no-sleep: {run['cold_synth_seconds']:.1f}s with a synth, "
          f"{run['cached_synth_seconds_median']:.1f}s with the cached synth")
    if "setup_sh" in figures:
        s = figures["setup_sh"]
        print(f"./setup.sh --fail NotifyCustomer=permanent: first {s['first_seconds']:.1f}s, second "
              f"{s['second_seconds_with_demo']:.1f}s (setup check alone: {s['setup_only_no_demo_seconds']:.2f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
