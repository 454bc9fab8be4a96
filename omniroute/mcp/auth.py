"""Who calls an MCP tool: the admin, or one gateway key (whose memories it may touch, as far
as its scopes let it: `read:memory`, `write:memory`)."""

from __future__ import annotations

import hmac
from contextvars import ContextVar
from dataclasses import dataclass

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from omniroute.core.brake import GuessBrake, Held
from omniroute.core.errors import error_payload
from omniroute.core.keys import SCOPES, ApiKeyStore

ADMIN_CLIENT = "omniroute-admin"
# The address of the HTTP client whose token is being checked (set by ClientAddress).
CLIENT_ADDRESS: ContextVar[str | None] = ContextVar("omniroute_mcp_client", default=None)


@dataclass(frozen=True)
class Caller:
    api_key_id: str | None  # None: the admin, who may name any key
    scopes: frozenset[str] = frozenset(SCOPES)  # the admin has them all

    def allowed(self, scope: str) -> Caller:
        """This caller, when it holds `scope`; else a ToolError that names it."""
        if scope not in self.scopes:
            raise ToolError(
                f"This key lacks the {scope} scope, so it may not use this tool: an admin can "
                "grant it with PATCH /api/keys/{id}."
            )
        return self

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
    """Accepts the admin token and active gateway keys as MCP bearer tokens.

    Every check goes through the process's guessing brake, as /api and the studio's do: a
    token that is neither counts as a wrong guess from the client's address.
    """

    def __init__(self, admin_token: str, keys: ApiKeyStore, brake: GuessBrake) -> None:
        self._admin = admin_token
        self._keys = keys
        self._brake = brake

    async def verify_token(self, token: str) -> AccessToken | None:
        address = CLIENT_ADDRESS.get()
        return await anyio.to_thread.run_sync(
            self._brake.attempt, address, token, lambda: self._check(token)
        )

    def _check(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._admin.encode()):
            return AccessToken(token=token, client_id=ADMIN_CLIENT, scopes=["admin"])
        key = self._keys.authenticate(token)
        if key is None:
            return None
        return AccessToken(token=token, client_id=key.id, scopes=list(key.scopes))


class ClientAddress:
    """ASGI middleware: names the client for the token check, and answers the brake's Held
    with 429 and Retry-After (in our one error shape)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        marker = CLIENT_ADDRESS.set(client[0] if client else None)
        try:
            await self.app(scope, receive, send)
        except Held as held:
            message = "Too many wrong tokens from this address: slow down."
            response = JSONResponse(
                error_payload(429, message),
                status_code=429,
                headers={"Retry-After": str(held.retry_after)},
            )
            await response(scope, receive, send)
        finally:
            CLIENT_ADDRESS.reset(marker)


def current_caller(stdio_caller: Caller | None, scope: str) -> Caller:
    """The HTTP caller from its bearer token, else the stdio process's own key; either must
    hold `scope` for the tool at hand."""
    token = get_access_token()
    if token is not None:
        if token.client_id == ADMIN_CLIENT:
            return Caller(None)
        return Caller(token.client_id, frozenset(token.scopes)).allowed(scope)
    if stdio_caller is None:
        raise ToolError("Not authenticated.")
    return stdio_caller.allowed(scope)
