"""Fuzz the API contract as issue 27 asks: `make fuzz`.

Serves the app on loopback (a fresh data dir, the test suite's fake OpenAI-compatible upstream
as provider `fake`, which is also the default provider, and one gateway key), then runs
schemathesis with every check (`-c all`) over /api with the admin token and over /v1 (and
mem0's /v1 and /v3 routes, docs/mem0.md) with the key. schemathesis.toml beside the Makefile
holds what the spec cannot say (read it).

The guess brake is lifted for the run: schemathesis sends wrong tokens on purpose (its
`ignored_auth` check), and the brake's 429 to an address that keeps guessing is a defence, not
a breach of the contract; left on, it would answer every later request 429.

Exit status: 0 when both runs report no failure, else the first failing run's status.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omniroute.core.brake import GuessBrake  # noqa: E402
from omniroute.factory import create_app  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.gateway_server import RunningGateway  # noqa: E402

ADMIN_TOKEN = "fuzz-admin-token"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20, help="examples per operation")
    parser.add_argument("--seed", type=int, help="schemathesis's seed, to replay a run")
    args = parser.parse_args()
    GuessBrake.MAX_FAILURES = sys.maxsize
    data_dir = tempfile.mkdtemp(prefix="omniroute-fuzz-")
    upstream = FakeUpstream().start()
    provider = {"id": "fake", "baseUrl": upstream.base_url, "apiKey": "k", "models": ["m"]}
    app = create_app(
        {
            "DATA_DIR": data_dir,
            "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
            "OMNIROUTE_PROVIDERS": [provider],
        }
    )
    svc = app.extensions["omniroute"]
    svc.providers.set_default("fake")
    secret = svc.keys.create("fuzz")[1]
    server = RunningGateway(app).start()
    try:
        status = 0
        # /v1 first: the /api run revokes keys, the fuzz key among them.
        for paths, token in (("^/v[13]", secret), ("^/api", ADMIN_TOKEN)):
            code = schemathesis(server.url, paths, token, args.examples, args.seed)
            status = status or code
        return status
    finally:
        server.stop()
        svc.close()
        upstream.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def schemathesis(url: str, paths: str, token: str, examples: int, seed: int | None) -> int:
    command = [
        str(Path(sys.executable).with_name("schemathesis")), "run", f"{url}/openapi.json",
        "--checks", "all", "--include-path-regex", paths, "--max-examples", str(examples),
        "--header", f"Authorization: Bearer {token}",
    ]  # fmt: skip
    if seed is not None:
        command += ["--seed", str(seed)]
    print(f"\n=== schemathesis over {paths} ===", flush=True)
    return subprocess.run(command, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
