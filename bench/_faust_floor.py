"""The faust floor: an agent that only takes batches of records and acks them, as the worker's agent does.

Run by ``bench/streams.py`` as ``python bench/_faust_floor.py BOOTSTRAP TOPIC N``: it prints the records/s
faust itself delivers on the same topic with the worker's settings (batching, fetch-wait cap, GIL switch
interval), from its first record to its N-th, and exits. Whatever the worker does costs on top of this.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(bootstrap: str, topic: str, n: int) -> None:
    """Consume ``n`` records of ``topic`` through a do-nothing faust agent; print the rate; exit."""
    import faust

    from streams.app import cap_fetch_wait
    from streams.config import WorkerConfig

    cfg = WorkerConfig(bootstrap=bootstrap)
    sys.setswitchinterval(0.0002)  # as run_worker does
    cap_fetch_wait(cfg.fetch_max_wait_ms)
    app: Any = faust.App(
        f"bench-floor-{os.getpid()}", broker=f"kafka://{bootstrap}", store="memory://",
        datadir=tempfile.mkdtemp(prefix="bench-floor-"), topic_allow_declare=False, topic_disable_leader=True,
        key_serializer="raw", value_serializer="raw", consumer_auto_offset_reset="earliest", web_enabled=False,
        stream_wait_empty=False,
    )
    source = app.topic(topic, key_type=bytes, value_type=bytes, partitions=1)
    seen = [0]
    first = [0]
    t0 = [0.0]

    async def floor(stream: Any) -> None:
        async for events in stream.noack_take(cfg.batch_max, within=cfg.batch_within_s):
            if not seen[0]:  # the clock starts once the first batch is in: its records are not counted
                t0[0] = time.perf_counter()
                first[0] = len(events)
            seen[0] += len(events)
            for event in events:
                await stream.ack(event)
            if seen[0] >= n:
                print(f"floor {(seen[0] - first[0]) / (time.perf_counter() - t0[0]):.0f}", flush=True)
                os._exit(0)

    app.agent(source, name="floor")(floor)
    faust.Worker(app, loglevel="WARNING", quiet=True).execute_from_commandline()


if __name__ == "__main__":
    bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.argv = sys.argv[:1]  # faust's worker parses the command line
    main(bootstrap, topic, count)
