"""`UPSTREAM_JWT_CERTIFICATE=certs/jwt.crt make serve` (docs/migrate.md): the local API accepts the
tokens an upstream deployment issued, as a stack deployed with the UpstreamJwtCertificate parameter
does. The variable becomes that parameter: the template's default never silently replaces it, and
what is not a certificate stops serve before it starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from nimbus_tools.local.functions import worker_environment
from nimbus_tools.local.main import UPSTREAM_CERTIFICATE_VARIABLE, with_upstream_certificate
from nimbus_tools.template import function_specs, load_template
from tests.migration.upstream import UpstreamSigner

PARAMETER = "UpstreamJwtCertificate"


@pytest.fixture(scope="module")
def pem() -> str:
    return UpstreamSigner().certificate_pem


def _functions_see(params: dict[str, str], environ: dict[str, str]) -> set[str | None]:
    """What UPSTREAM_JWT_CERTIFICATE each function of the template runs with."""
    specs = function_specs(load_template(), params)
    return {
        worker_environment(s, "http://127.0.0.1:9", base=environ).get("UPSTREAM_JWT_CERTIFICATE")
        for s in specs
    }


def test_the_certificate_file_named_in_the_environment_reaches_every_function(
    tmp_path: Path, pem: str
) -> None:
    crt = tmp_path / "jwt.crt"
    crt.write_text(pem)
    environ = {UPSTREAM_CERTIFICATE_VARIABLE: str(crt)}

    params = with_upstream_certificate({}, environ)

    assert params == {PARAMETER: pem}
    assert _functions_see(params, environ) == {pem}  # not the template's empty default


def test_the_certificate_itself_may_be_the_variables_value(pem: str) -> None:
    assert with_upstream_certificate({"Other": "x"}, {UPSTREAM_CERTIFICATE_VARIABLE: pem}) == {
        "Other": "x",
        PARAMETER: pem,
    }


def test_without_the_variable_no_upstream_token_is_accepted() -> None:
    assert with_upstream_certificate({}, {}) == {}
    assert with_upstream_certificate({}, {UPSTREAM_CERTIFICATE_VARIABLE: ""}) == {}
    assert _functions_see({}, {}) == {""}


def test_a_param_given_on_the_command_line_wins_over_the_environment(tmp_path: Path, pem: str) -> None:
    other = UpstreamSigner().certificate_pem
    crt = tmp_path / "jwt.crt"
    crt.write_text(pem)

    params = with_upstream_certificate({PARAMETER: other}, {UPSTREAM_CERTIFICATE_VARIABLE: str(crt)})

    assert params == {PARAMETER: other}


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("missing.crt", "cannot read"),
        ("private.pem", r"not a PEM X\.509 certificate"),
        ("rsa.crt", r"not an ES256 \(P-256\) key"),
    ],
)
def test_what_is_not_upstreams_certificate_is_refused_before_serving(
    tmp_path: Path, given: str, why: str
) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    signer = UpstreamSigner()
    (tmp_path / "private.pem").write_bytes(
        signer.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(signer.certificate.not_valid_before_utc)
        .not_valid_after(signer.certificate.not_valid_after_utc)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "rsa.crt").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))

    with pytest.raises(ValueError, match=why) as refused:
        with_upstream_certificate({}, {UPSTREAM_CERTIFICATE_VARIABLE: str(tmp_path / given)})
    assert UPSTREAM_CERTIFICATE_VARIABLE in str(refused.value)


def test_a_bad_certificate_given_as_a_param_is_refused_too() -> None:
    with pytest.raises(ValueError, match=r"not a PEM X\.509 certificate"):
        with_upstream_certificate(
            {PARAMETER: "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----"}, {}
        )
