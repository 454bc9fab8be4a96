"""The MCP server over stdio: `OMNIROUTE_API_KEY=sk-omr-... python -m omniroute.mcp`.

It acts as that gateway key, on its memories only. Logs go to stderr; stdout carries MCP.
"""

from __future__ import annotations

import sys

from omniroute.factory import create_app
from omniroute.mcp.auth import Caller
from omniroute.mcp.server import build_server


def main() -> int:
    app = create_app()
    svc = app.extensions["omniroute"]
    key = svc.keys.authenticate(app.config["OMNIROUTE_API_KEY"] or "")
    if key is None:
        print("OMNIROUTE_API_KEY must be an active gateway key (sk-omr-...).", file=sys.stderr)
        return 2
    server = build_server(
        svc,
        app.config,
        base_url=f"http://{app.config['HOST']}:{app.config['PORT']}",
        stdio_caller=Caller(key.id, frozenset(key.scopes)),
    )
    server.run("stdio")
    svc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
