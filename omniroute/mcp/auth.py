"""Who calls an MCP tool: the admin, or one gateway key (whose memories it may touch)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError

from ..keys import ApiKeyStore

ADMIN_CLIENT = "omniroute-admin"


@dataclass(frozen=True)
class Caller:
    api_key_id: str | None  # None: the admin, who may name any key

    def owner(self, named: str | None) -> str:
        """The key whose memories a call acts on: the caller's own, or (admin) the one named."""
        if self.api_key_id is None:
            if not named:
                raise ToolError("apiKeyId is required with the admin token.")
            return named
        if named and named != self.api_key_id:
            raise ToolError("apiKeyId names another key: a key reaches only its own memories.")
        return self.api_key_id


class GatewayTokenVerifier:
    """Accepts the admin token and active gateway keys as MCP bearer tokens."""

    def __init__(self, admin_token: str, keys: ApiKeyStore) -> None:
        self._admin = admin_token
        self._keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._admin.encode()):
            return AccessToken(token=token, client_id=ADMIN_CLIENT, scopes=["admin"])
        key = await anyio.to_thread.run_sync(self._keys.authenticate, token)
        if key is None:
            return None
        return AccessToken(token=token, client_id=key.id, scopes=["memory"])


def current_caller(stdio_caller: Caller | None) -> Caller:
    """The HTTP caller from its bearer token, else the stdio process's own key."""
    token = get_access_token()
    if token is not None:
        return Caller(None if token.client_id == ADMIN_CLIENT else token.client_id)
    if stdio_caller is None:
        raise ToolError("Not authenticated.")
    return stdio_caller
