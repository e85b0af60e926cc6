"""KMS as the sealing's :class:`nimbus_core.adapters.sealing.KeyService`: data keys made
(GenerateDataKey) and opened (Decrypt) under the stage's encryption context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.domain.ports import SealError

if TYPE_CHECKING:
    from types_boto3_kms import KMSClient

# KMS's answers that say "this ciphertext is not yours to open" (tampered, another key, another
# context, a key disabled or scheduled for deletion): the sealed secret does not open, like a
# wrong one. Throttling and outages stay DependencyError (a bare 500).
_REFUSED = frozenset(
    {
        "InvalidCiphertextException",
        "IncorrectKeyException",
        "DisabledException",
        "KMSInvalidStateException",
        "NotFoundException",
    }
)


class KmsKeys:
    """Data keys from KMS, with the client built on first use."""

    def __init__(self, client: KMSClient) -> None:
        self._client = client

    def generate_data_key(self, key_id: str, context: Mapping[str, str]) -> tuple[str, bytes, bytes]:
        """A new AES-256 data key under ``key_id``: (the key's ARN, the key, the key encrypted)."""
        with aws_errors("GenerateDataKey (TOTP sealing)"):
            made = self._client.generate_data_key(
                KeyId=key_id, KeySpec="AES_256", EncryptionContext=dict(context)
            )
        return made["KeyId"], made["Plaintext"], made["CiphertextBlob"]

    def decrypt_data_key(self, key_arn: str, encrypted: bytes, context: Mapping[str, str]) -> bytes:
        """The data key ``encrypted`` under ``key_arn`` (the key named, so a blob of another key is
        refused rather than opened with it)."""
        with aws_errors("Decrypt (TOTP data key)"):
            try:
                opened = self._client.decrypt(
                    KeyId=key_arn, CiphertextBlob=encrypted, EncryptionContext=dict(context)
                )
            except ClientError as exc:
                if error_code(exc) in _REFUSED:
                    raise SealError(f"KMS refused the data key: {error_code(exc)}") from exc
                raise
        return opened["Plaintext"]
