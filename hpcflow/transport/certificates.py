"""A per-run certificate authority: who may talk to a run's Dask scheduler.

At submit time hpcflow makes a fresh CA, signs ONE certificate with it, and throws the
CA's private key away: nothing can ever be signed by that CA again, so the only
processes that can join the run's cluster are those that can read the run's key file.
Every rank (scheduler, driver, workers) and the submit host present that certificate
and accept only peers signed by the run's CA (distributed requires client certificates
on both sides of a TLS connection).

Files, in ``RUN_DIR/tls/`` (directory 0700, every file 0600, owner only):
``ca.pem`` (the CA certificate), ``cert.pem`` (the run's certificate), ``key.pem``
(its private key).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path

from hpcflow.errors import HpcflowError
from hpcflow.store.atomic import write_bytes_atomic
from hpcflow.store.paths import RunPaths

#: Long enough for a run that is resumed by continuation allocations for months.
VALIDITY = datetime.timedelta(days=400)


@dataclass(frozen=True)
class RunCredentials:
    """Where one run's TLS files are (their names: :class:`~hpcflow.store.paths.RunPaths`)."""

    paths: RunPaths

    @property
    def directory(self) -> Path:
        return self.paths.tls_dir

    @property
    def ca_file(self) -> Path:
        return self.paths.tls_ca

    @property
    def cert_file(self) -> Path:
        return self.paths.tls_cert

    @property
    def key_file(self) -> Path:
        return self.paths.tls_key

    def exist(self) -> bool:
        return all(p.is_file() for p in (self.ca_file, self.cert_file, self.key_file))

    def check_private(self) -> None:
        """Refuse keys that other users could read (a copied or chmod-ed run dir), or
        that are not ours (planted: whoever wrote them can join the cluster)."""
        for path in (self.directory, self.ca_file, self.cert_file, self.key_file):
            owner = path.lstat().st_uid
            if owner != os.geteuid() or path.is_symlink():
                raise HpcflowError(
                    f"{path} is not yours (owner uid {owner}"
                    + (", a symbolic link)" if path.is_symlink() else ")"),
                    hint="someone else may have planted the run's TLS files: remove "
                    f"{self.directory} if the run is yours, or use a new --run-dir",
                )
        for path in (self.directory, self.key_file):
            mode = path.stat().st_mode & 0o077
            if mode:
                raise HpcflowError(
                    f"{path} can be read by other users (mode {path.stat().st_mode & 0o777:o})",
                    hint=f"chmod go-rwx {path}; anyone who can read the run's key can run "
                    "code in its cluster",
                )


def credentials_in(run_dir: Path) -> RunCredentials:
    """The credentials of the run at ``run_dir`` (they may not exist yet)."""
    return RunCredentials(RunPaths(Path(run_dir)))


def create_credentials(run_dir: Path, run_id: str) -> RunCredentials:
    """Make the run's CA and certificate, unless they exist (a resumed run keeps them)."""
    creds = credentials_in(run_dir)
    if creds.exist():
        creds.check_private()
        return creds
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    start = now - datetime.timedelta(minutes=5)  # clocks of compute nodes drift
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"hpcflow run {run_id} CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"hpcflow run {run_id}")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    del ca_key  # never written: nothing else can be signed by this CA
    creds.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(creds.directory, 0o700)
    _write_private(creds.ca_file, ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(creds.cert_file, cert.public_bytes(serialization.Encoding.PEM))
    _write_private(
        creds.key_file,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    return creds


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a file that is 0600 from its first byte, then rename it in place."""
    write_bytes_atomic(path, data, mode=0o600)
