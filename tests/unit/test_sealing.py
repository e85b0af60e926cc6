"""The sealing rules, on the in-memory KMS (tests.fakes.FakeKeys): what a sealed TOTP seed is bound
to, that nothing of it is stored in the clear, and what it costs in KMS calls per instance."""

from __future__ import annotations

import base64

import pytest

from nimbus_core.adapters.sealing import PURPOSE, Sealed, Sealer, is_sealed, parse
from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.ports import SealError
from tests.fakes import FAKE_KEY, FakeKeys

SEED = "JBSWY3DPEHPK3PXP"  # 16 base32 characters: the 80-bit shape upstream's secrets have
OTHER_KEY = "arn:aws:kms:us-east-1:123456789012:key/99999999-2222-4333-8444-555555555555"


def instance(keys: FakeKeys, *, key_id: str = FAKE_KEY, stage: str = "prod") -> Sealer:
    """A warm function instance's sealer (its own data-key cache) over the one KMS."""
    return Sealer(lambda: keys, key_id=key_id, stage=stage)


def test_a_sealed_seed_opens_for_its_user_and_factor_and_holds_no_plaintext() -> None:
    sealer = instance(FakeKeys())
    sealed = sealer.seal(SEED, user_id="u1", factor_id="f1")
    assert is_sealed(sealed)
    assert SEED not in sealed
    raw = b"".join(
        base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)) for p in sealed.removeprefix("kms1.").split(".")
    )
    assert SEED.encode() not in raw
    assert sealer.unseal(sealed, user_id="u1", factor_id="f1") == SEED


@pytest.mark.parametrize(("user_id", "factor_id"), [("u2", "f1"), ("u1", "f2"), ("u2", "f2")])
def test_a_sealed_seed_moved_to_another_user_or_factor_does_not_open(user_id: str, factor_id: str) -> None:
    sealer = instance(FakeKeys())
    sealed = sealer.seal(SEED, user_id="u1", factor_id="f1")
    with pytest.raises(SealError):
        sealer.unseal(sealed, user_id=user_id, factor_id=factor_id)


def test_a_tampered_ciphertext_nonce_or_data_key_does_not_open() -> None:
    keys = FakeKeys()
    sealed = parse(instance(keys).seal(SEED, user_id="u1", factor_id="f1"))
    flipped = bytes([sealed.ciphertext[0] ^ 1]) + sealed.ciphertext[1:]
    for tampered in (
        Sealed(sealed.key_arn, sealed.encrypted_key, sealed.nonce, flipped),
        Sealed(sealed.key_arn, sealed.encrypted_key, bytes(12), sealed.ciphertext),
        Sealed(sealed.key_arn, sealed.encrypted_key[:-1] + b"\0", sealed.nonce, sealed.ciphertext),
    ):
        with pytest.raises(SealError):
            instance(keys).unseal(tampered.text(), user_id="u1", factor_id="f1")  # a cold instance


@pytest.mark.parametrize("value", ["kms1.", "kms1.a.b.c", "kms1.!!.!!.!!.!!", SEED, ""])
def test_a_malformed_sealed_value_is_refused_not_crashed_on(value: str) -> None:
    with pytest.raises(SealError):
        instance(FakeKeys()).unseal(value, user_id="u1", factor_id="f1")


def test_a_data_key_of_another_stage_does_not_open() -> None:
    keys = FakeKeys()
    sealed = instance(keys, stage="prod").seal(SEED, user_id="u1", factor_id="f1")
    with pytest.raises(SealError):
        instance(keys, stage="dev").unseal(sealed, user_id="u1", factor_id="f1")


def test_an_instance_makes_one_data_key_and_never_decrypts_its_own() -> None:
    keys = FakeKeys()
    sealer = instance(keys)
    sealed = [sealer.seal(SEED, user_id=f"u{n}", factor_id=f"f{n}") for n in range(50)]
    assert [sealer.unseal(s, user_id=f"u{n}", factor_id=f"f{n}") for n, s in enumerate(sealed)] == [SEED] * 50
    assert keys.calls == ["GenerateDataKey"]
    assert len({parse(s).nonce for s in sealed}) == 50  # a fresh nonce per seal


def test_a_warm_instance_decrypts_each_data_key_once() -> None:
    keys = FakeKeys()
    sealed = [instance(keys).seal(SEED, user_id="u1", factor_id=f"f{n}") for n in range(3)]  # 3 sealers
    keys.calls.clear()
    reader = instance(keys)
    for _ in range(20):
        for n, value in enumerate(sealed):
            assert reader.unseal(value, user_id="u1", factor_id=f"f{n}") == SEED
    assert keys.calls == ["Decrypt"] * 3


def test_a_seed_sealed_under_the_previous_key_still_opens_and_new_seals_use_the_new_key() -> None:
    keys = FakeKeys(FAKE_KEY, OTHER_KEY)
    old = instance(keys, key_id=FAKE_KEY).seal(SEED, user_id="u1", factor_id="f1")
    rotated = instance(keys, key_id=OTHER_KEY)
    assert rotated.unseal(old, user_id="u1", factor_id="f1") == SEED
    assert rotated.sealed_with(old) == FAKE_KEY
    assert rotated.sealed_with(rotated.seal(SEED, user_id="u1", factor_id="f1")) == OTHER_KEY


def test_the_kms_context_names_the_purpose_and_stage_not_the_user() -> None:
    assert instance(FakeKeys(), stage="prod").context == {"purpose": PURPOSE, "stage": "prod"}


def test_sealing_without_a_configured_key_is_a_deployment_error() -> None:
    with pytest.raises(DependencyError, match="TOTP_KEY_ARN"):
        instance(FakeKeys(), key_id="").seal(SEED, user_id="u1", factor_id="f1")
