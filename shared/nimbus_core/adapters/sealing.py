"""Sealed secrets: TOTP seeds encrypted under a KMS key by envelope encryption (docs/security.md).

A seed is encrypted here with AES-256-GCM under a *data key*; the data key is made by KMS
(GenerateDataKey) and stored beside the ciphertext only in its KMS-encrypted form, so reading a
seed takes KMS's Decrypt of that data key, which only a role the key's grants name can call.

- **One data key per instance.** An instance asks KMS for one data key the first time it seals and
  seals everything with it. Every data key it opens (its own included) is kept in memory, keyed by
  its encrypted form: a warm instance calls Decrypt at most once per data key, and never for its
  own. Readers therefore pay one Decrypt per distinct data key they meet (one per instance that
  sealed, one per ``nimbus totp reseal`` or ``nimbus import`` run), not per request.
- **Two bindings.** KMS's encryption context names what the data key is for (``purpose``) and the
  stage; it is the same for every data key of a stage, so one data key serves every user, and the
  key's grants can require it (``kms:EncryptionContext:*``). The user and the factor are bound by
  AES-GCM's associated data: a sealed seed copied onto another user or factor does not open.
- **The sealed form records its key.** ``kms1.<key ARN>.<encrypted data key>.<nonce>.<ciphertext>``
  (each part base64url): Decrypt is asked with the key that sealed it, so seeds sealed under an
  older key keep opening while ``nimbus totp reseal`` moves them to a new one.

Nothing here imports ``cryptography`` until a seed is sealed or opened: login's path never does
unless it checks a TOTP code. A secret is never logged, nor put in an exception's message.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.ports import SealError

PREFIX = "kms1."
PURPOSE = "nimbus-totp"
_AAD_LABEL = b"nimbus-totp/1"
_NONCE_BYTES = 12  # AES-GCM's standard nonce: random per seal (a data key seals few messages)
# Data keys kept open per instance: each is 32 bytes; beyond this many distinct ones (instances that
# sealed), the least recently used is dropped and opened again if met again.
MAX_OPEN_DATA_KEYS = 1024


class KeyService(Protocol):
    """What sealing needs from KMS: data keys made and opened under an encryption context."""

    def generate_data_key(self, key_id: str, context: Mapping[str, str]) -> tuple[str, bytes, bytes]:
        """A new 256-bit data key under ``key_id``: (the key's ARN, the key, the key encrypted)."""
        ...

    def decrypt_data_key(self, key_arn: str, encrypted: bytes, context: Mapping[str, str]) -> bytes:
        """The data key ``encrypted`` under ``key_arn``; :class:`SealError` when KMS refuses it as
        not its own (tampered, another key, another context)."""
        ...


@dataclass(frozen=True, slots=True)
class Sealed:
    """The parts of a sealed value."""

    key_arn: str
    encrypted_key: bytes
    nonce: bytes
    ciphertext: bytes

    def text(self) -> str:
        """The stored form."""
        parts = (self.key_arn.encode(), self.encrypted_key, self.nonce, self.ciphertext)
        return PREFIX + ".".join(base64.urlsafe_b64encode(p).decode().rstrip("=") for p in parts)


def is_sealed(value: str) -> bool:
    """Whether ``value`` is a sealed value (else a plaintext seed stored before sealing existed)."""
    return value.startswith(PREFIX)


def parse(value: str) -> Sealed:
    """The parts of a sealed value, or :class:`SealError`."""
    if not is_sealed(value):
        raise SealError("not a sealed value")
    pieces = value.removeprefix(PREFIX).split(".")
    if len(pieces) != 4:
        raise SealError("malformed sealed value")
    try:
        raw = [base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)) for p in pieces]
        key_arn = raw[0].decode("ascii")
    except (binascii.Error, ValueError) as exc:
        raise SealError("malformed sealed value") from exc
    if len(raw[2]) != _NONCE_BYTES or not key_arn:
        raise SealError("malformed sealed value")
    return Sealed(key_arn=key_arn, encrypted_key=raw[1], nonce=raw[2], ciphertext=raw[3])


def associated_data(user_id: str, factor_id: str) -> bytes:
    """What a seed is bound to besides its key: its user and its factor (AES-GCM associated data)."""
    return b"\0".join((_AAD_LABEL, user_id.encode(), factor_id.encode()))


def pending_factor_id(pending_hash: str) -> str:
    """The factor a pending enrolment's seed is bound to: the enrolment itself (its token's hash)."""
    return f"pending:{pending_hash}"


class Sealer:
    """The :class:`nimbus_core.domain.ports.SecretSealer`: seals secrets for one stage under one
    KMS key (``key_id``: id, ARN or alias), and opens those sealed under any key KMS lets this role
    use."""

    def __init__(self, keys: Callable[[], KeyService], *, key_id: str, stage: str) -> None:
        self._make_keys = keys  # built on first use: no client until a seed is sealed or opened
        self._built: KeyService | None = None
        self._key_id = key_id
        self.context: dict[str, str] = {"purpose": PURPOSE, "stage": stage}
        self._sealing: tuple[str, bytes, bytes] | None = None  # (key ARN, data key, encrypted)
        self._open: OrderedDict[bytes, bytes] = OrderedDict()  # encrypted data key -> data key
        # A function instance is single-threaded; the operator's tools seal from many threads, and
        # still make one data key between them.
        self._lock = threading.Lock()

    def _keys(self) -> KeyService:
        if self._built is None:
            self._built = self._make_keys()
        return self._built

    @property
    def key_id(self) -> str:
        """The KMS key new seals are made under."""
        return self._key_id

    def seal(self, secret: str, *, user_id: str, factor_id: str) -> str:
        """``secret`` sealed for ``user_id``'s factor ``factor_id`` (stored form)."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # only sealing pays for it

        with self._lock:
            if self._sealing is None:
                if not self._key_id:  # a deployment mistake, not a wrong answer: a bare 500
                    raise DependencyError("no KMS key is configured to seal with (TOTP_KEY_ARN)")
                arn, key, encrypted = self._keys().generate_data_key(self._key_id, self.context)
                self._sealing = (arn, key, encrypted)
                self._remember(encrypted, key)
            arn, key, encrypted = self._sealing
        nonce = os.urandom(_NONCE_BYTES)
        ciphertext = AESGCM(key).encrypt(nonce, secret.encode(), associated_data(user_id, factor_id))
        return Sealed(key_arn=arn, encrypted_key=encrypted, nonce=nonce, ciphertext=ciphertext).text()

    def unseal(self, value: str, *, user_id: str, factor_id: str) -> str:
        """The secret ``value`` seals, if it was sealed for ``user_id``'s factor ``factor_id``;
        :class:`SealError` otherwise."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        sealed = parse(value)
        with self._lock:
            key = self._open.get(sealed.encrypted_key)
            if key is None:
                key = self._keys().decrypt_data_key(sealed.key_arn, sealed.encrypted_key, self.context)
                self._remember(sealed.encrypted_key, key)
            else:
                self._open.move_to_end(sealed.encrypted_key)
        try:
            plain = AESGCM(key).decrypt(sealed.nonce, sealed.ciphertext, associated_data(user_id, factor_id))
        except (InvalidTag, ValueError) as exc:
            raise SealError("sealed value does not open for this user and factor") from exc
        return plain.decode()

    def is_sealed(self, value: str) -> bool:
        """Whether a stored ``value`` is sealed (else a plaintext seed stored before sealing)."""
        return is_sealed(value)

    def sealed_with(self, value: str) -> str:
        """The ARN of the KMS key a sealed value was sealed under."""
        return parse(value).key_arn

    def forget(self) -> None:
        """Drop every data key held, as a new instance starts (the benchmarks and the fault matrix
        count and fail a cold instance's KMS calls with it)."""
        with self._lock:
            self._sealing = None
            self._open.clear()

    def _remember(self, encrypted: bytes, key: bytes) -> None:
        self._open[encrypted] = key
        while len(self._open) > MAX_OPEN_DATA_KEYS:
            self._open.popitem(last=False)
