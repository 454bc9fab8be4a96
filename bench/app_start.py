"""What making an app costs: `create_app` on a fresh SQLite DATA_DIR (the migrations, the
services, every blueprint), and the first read of its OpenAPI spec, which builds the
operations. A web or worker process pays it once; the test suite pays it for nearly every
test, so it sets how long `make test` takes. Run with `make bench` or
`python bench/app_start.py [--apps 40]`.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omniroute.factory import create_app  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--apps", type=int, default=40)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    made, spec = [], []
    with tempfile.TemporaryDirectory() as root:
        for number in range(args.apps + 1):
            config = {"DATA_DIR": f"{root}/{number}", "OMNIROUTE_ADMIN_TOKEN": "bench-token"}
            started = time.perf_counter()
            app = create_app(config)
            ready = time.perf_counter()
            assert app.test_client().get("/openapi.json").status_code == 200
            read = time.perf_counter()
            app.extensions["omniroute"].close()
            if number:  # the first pays the imports
                made.append((ready - started) * 1000)
                spec.append((read - ready) * 1000)
    print(f"create_app, median of {args.apps}: {statistics.median(made):.1f} ms")
    print(f"first /openapi.json, median of {args.apps}: {statistics.median(spec):.1f} ms")


if __name__ == "__main__":
    main()
