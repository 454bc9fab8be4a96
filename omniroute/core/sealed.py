"""Secrets sealed at rest: provider API keys are stored encrypted, never in plain text.

Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`) with a key derived by HKDF from the
app's secret key (OMNIROUTE_SECRET_KEY or DATA_DIR/secret_key). Every process that reads the
database must therefore share that secret key. A sealed value reads `fernet:<token>`; a value
without that prefix is an old plain one, sealed by `ProviderStore.seal_plain_keys`.
"""

from __future__ import annotations

import base64
import logging
import re

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

log = logging.getLogger(__name__)

PREFIX = "fernet:"


class SecretBox:
    def __init__(self, secret_key: str) -> None:
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"omniroute/provider-api-keys"
        ).derive(secret_key.encode("utf-8"))
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))

    def seal(self, plain: str) -> str:
        return PREFIX + self._fernet.encrypt(plain.encode("utf-8")).decode("ascii")

    def open(self, stored: str) -> str | None:
        """The plain value; None when it was sealed with another secret key."""
        if not is_sealed(stored):
            return stored
        try:
            return self._fernet.decrypt(stored[len(PREFIX) :].encode("ascii")).decode("utf-8")
        except InvalidToken:
            log.warning("a stored secret was sealed with another secret key: set it again")
            return None


def is_sealed(stored: str) -> bool:
    return stored.startswith(PREFIX)


def masked(api_key: str | None) -> str | None:
    """A secret as the API shows it: `***` and its last four characters."""
    return f"***{api_key[-4:]}" if api_key else None


MASKED = re.compile(r"^(\*\*\*|\.\.\.).{0,4}$", re.DOTALL)


def is_masked(value: object) -> bool:
    """A key sent back as an answer showed it (`***9876`, or a provider's `...9876`)."""
    return isinstance(value, str) and MASKED.match(value) is not None


class KeyNeeded(ValueError):
    """A stored key would go to an address other than the one it was given for."""

    MESSAGE = (
        "the URL changed: send the API key again (or an empty one for none); a stored key "
        "stays only with the URL it was given for"
    )

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


def keeps_stored_key(given: object, *, given_present: bool, stored: bool, moved: bool) -> bool:
    """Whether a change keeps the stored key: it left the key out or sent it back masked.

    KeyNeeded when the kept key would then be sent to a new address (`moved`).
    """
    keep = not given_present or is_masked(given)
    if keep and stored and moved:
        raise KeyNeeded()
    return keep
