"""Bearer tokens per tenant.

``LANES_API_TOKENS="tenantA:token1,tenantB:token2"`` (whitespace around entries is
ignored; a tenant may have several tokens). A request without a valid token is
401; which tenant a token belongs to decides which sessions the request can see.
"""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Mapping

from fastapi import Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from worker.api.errors import ApiError

ENV_TOKENS = "LANES_API_TOKENS"
TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MIN_TOKEN_CHARS = 8

bearer_scheme = HTTPBearer(auto_error=False, description="a tenant's API token (LANES_API_TOKENS)")


class TokenConfigError(ValueError):
    pass


def parse_tokens(spec: str | None) -> dict[str, str]:
    """``tenant:token`` pairs, comma separated -> {token: tenant}. Errors name the entry, never the token."""
    tokens: dict[str, str] = {}
    for number, entry in enumerate((spec or "").split(","), start=1):
        entry = entry.strip()
        if not entry:
            continue
        tenant, sep, token = entry.partition(":")
        tenant, token = tenant.strip(), token.strip()
        if not sep or not tenant or not token:
            raise TokenConfigError(f"{ENV_TOKENS} entry {number} must look like tenant:token")
        if not TENANT.fullmatch(tenant):
            raise TokenConfigError(
                f"{ENV_TOKENS} entry {number}: tenant {tenant!r} must be 1-64 letters, digits, '_', '.', '-'"
            )
        if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
            raise TokenConfigError(
                f"{ENV_TOKENS} entry {number} (tenant {tenant!r}): a token needs at least {MIN_TOKEN_CHARS} "
                "characters and no whitespace"
            )
        if token in tokens and tokens[token] != tenant:
            raise TokenConfigError(f"{ENV_TOKENS}: tenants {tokens[token]!r} and {tenant!r} share a token")
        tokens[token] = tenant
    return tokens


def tokens_from_env() -> dict[str, str]:
    return parse_tokens(os.environ.get(ENV_TOKENS))


class Authenticator:
    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [(token.encode(), tenant) for token, tenant in tokens.items()]

    @property
    def configured(self) -> bool:
        return bool(self._tokens)

    def tenant_for(self, token: str) -> str | None:
        given = token.encode()
        found = None
        for candidate, tenant in self._tokens:  # compare against every token: no timing shortcut
            if hmac.compare_digest(candidate, given):
                found = tenant
        return found

    def __call__(self, credentials: HTTPAuthorizationCredentials | None) -> str:
        challenge = {"WWW-Authenticate": "Bearer"}
        if not self._tokens:
            raise ApiError(401, "unauthorized", f"no API tokens are configured on this server ({ENV_TOKENS})",
                           headers=challenge)
        if credentials is None:
            raise ApiError(401, "unauthorized", "missing bearer token (Authorization: Bearer <token>)",
                           headers=challenge)
        tenant = self.tenant_for(credentials.credentials)
        if tenant is None:
            raise ApiError(401, "unauthorized", "invalid bearer token", headers=challenge)
        return tenant


def require_tenant(request: Request, credentials: HTTPAuthorizationCredentials | None = None) -> str:
    """The tenant of the request's bearer token (401 otherwise)."""
    return request.app.state.auth(credentials)
