"""Benchmark: PrepareBatch's manifest check, CPU time per million items, scaled to a Lambda
function's memory size (not a test).

    .venv/bin/python benchmarks/prepare_batch_benchmark.py                 # 1,000,000 items, JSON and CSV
    .venv/bin/python benchmarks/prepare_batch_benchmark.py --items 200000 --json

What runs is PrepareBatch's own code path (``iter_manifest`` + ``count_items``: parse every item,
check it is an object of at most ``maxItemBytes``), fed from a generated manifest in 64 KiB reads
generated before the clock starts (the S3 read is not timed: at Lambda's network speed, tens of MB/s or more, it is a small share).
The time measured is CPU time (``time.process_time``) of this one process, so other work on the
machine does not inflate it.

Scaling, honestly stated: AWS allocates CPU in proportion to memory, "at 1,769 MB, a function has
the equivalent of one vCPU" (Lambda developer guide, "Configure Lambda function memory"). This
check is single-threaded pure Python, so at M MB (M < 1,769) it gets M / 1,769 of a vCPU and takes
``cpu_seconds * 1769 / M``; above 1,769 MB a single thread gains nothing. The factor assumes a
Lambda vCPU as fast as one core of the machine running the benchmark: an estimate, not a promise,
which is why the kit keeps a safety factor (``SAFETY``) between the estimate and the timeout.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator

from fanout_kit.patterns.distributed_map.manifest import READ_CHUNK_BYTES, count_items, iter_manifest

VCPU_MB = 1769  # AWS: one full vCPU at 1,769 MB
SAFETY = 2.0  # the function timeout leaves this factor over the estimate


def item(i: int) -> dict:
    """A typical small item (~70 bytes of JSON), as the Map examples use."""
    return {"imageId": f"img-{i}", "width": i % 1000, "tag": "x" * 16}


def manifest_chunks(n: int, fmt: str) -> Iterator[bytes]:
    """The manifest's bytes in 64 KiB reads, generated on the fly (nothing held in memory)."""
    buf = bytearray(b"[" if fmt == "JSON" else b"imageId,width,tag\n")
    for i in range(n):
        if fmt == "JSON":
            buf += (("," if i else "") + json.dumps(item(i))).encode()
        else:
            row = item(i)
            buf += f"{row['imageId']},{row['width']},{row['tag']}\n".encode()
        if len(buf) >= READ_CHUNK_BYTES:
            yield bytes(buf[:READ_CHUNK_BYTES])
            del buf[:READ_CHUNK_BYTES]
    if fmt == "JSON":
        buf += b"]"
    while buf:
        yield bytes(buf[:READ_CHUNK_BYTES])
        del buf[:READ_CHUNK_BYTES]


def measure(n: int, fmt: str, memory_mb: int) -> dict:
    chunks = list(manifest_chunks(n, fmt))  # generated before the clock starts
    size = sum(len(c) for c in chunks)
    started = time.process_time()
    total = count_items(iter_manifest(iter(chunks), fmt, "bench", max_item_bytes=8192), max_item_bytes=8192, where="bench")
    cpu = time.process_time() - started
    del chunks
    assert total == n
    per_million = cpu * 1_000_000 / n
    scale = VCPU_MB / min(memory_mb, VCPU_MB)
    return {
        "format": fmt,
        "items": n,
        "manifest_bytes": size,
        "cpu_seconds": round(cpu, 2),
        "cpu_seconds_per_million": round(per_million, 2),
        "memory_mb": memory_mb,
        "lambda_seconds_per_million": round(per_million * scale, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--memory", type=int, default=256, help="Lambda memory size to scale to (MB, default 256)")
    parser.add_argument("--json", action="store_true", help="one JSON object per format on its own line")
    args = parser.parse_args(argv)
    for fmt in ("JSON", "CSV"):
        r = measure(args.items, fmt, args.memory)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print(
                f"{fmt}: {r['items']:,} items ({r['manifest_bytes'] / 2**20:.1f} MiB): {r['cpu_seconds']} s CPU here = "
                f"{r['cpu_seconds_per_million']} s per million; at {args.memory} MB "
                f"(x{VCPU_MB / min(args.memory, VCPU_MB):.2f}): ~{r['lambda_seconds_per_million']} s per million"
            )


if __name__ == "__main__":
    main()
