"""Throwaway X.509 certificates for TLS tests: a CA, server certificates for 127.0.0.1 and
client certificates it signs (``cryptography``, ECDSA P-256, valid for a day)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    cert_file: Path
    key_file: Path
    serial: int


class Authority:
    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .add_extension(x509.KeyUsage(
                         digital_signature=False, content_commitment=False,
                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                         key_cert_sign=True, crl_sign=True, encipher_only=False,
                         decipher_only=False), True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(
                         self.key.public_key()), False)
                     .sign(self.key, hashes.SHA256()))
        self.cert_file = directory / f"{name}-ca.pem"
        self.cert_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, server: bool) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.ExtendedKeyUsage([usage]), False)
                   # Python 3.13's default contexts verify strictly (VERIFY_X509_STRICT): a
                   # certificate must name the key that signed it.
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       self.key.public_key()), False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                                  False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_file = self.directory / f"{name}.pem"
        key_file = self.directory / f"{name}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return Issued(cert_file, key_file, cert.serial_number)


def serial_of(der: bytes) -> int:
    """The serial number of a DER certificate (``SSLObject.getpeercert(binary_form=True)``)."""
    return x509.load_der_x509_certificate(der).serial_number
