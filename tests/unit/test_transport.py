"""Per-run credentials, the transport choice, and where a run's dashboard is."""

from __future__ import annotations

import json
import logging
import stat

import pytest

from hpcflow.api.dashboard import find_dashboard
from hpcflow.errors import HpcflowError, ProfileError
from hpcflow.settings.profile import Profile
from hpcflow.transport.certificates import create_credentials, credentials_in
from hpcflow.transport.security import check_choice, security_for


def test_credentials_are_private_and_kept_on_resume(tmp_path):
    creds = create_credentials(tmp_path, "r1")
    assert stat.S_IMODE(creds.directory.stat().st_mode) == 0o700
    for path in (creds.ca_file, creds.cert_file, creds.key_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = creds.cert_file.read_bytes()
    again = create_credentials(tmp_path, "r1")
    assert again.cert_file.read_bytes() == before
    # No CA key is written: nothing else can be signed by the run's CA.
    assert sorted(p.name for p in creds.directory.iterdir()) == ["ca.pem", "cert.pem", "key.pem"]
    assert b"PRIVATE KEY" not in creds.ca_file.read_bytes()


def test_certificate_is_signed_by_the_run_ca(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    creds = create_credentials(tmp_path, "r2")
    ca = x509.load_pem_x509_certificate(creds.ca_file.read_bytes())
    cert = x509.load_pem_x509_certificate(creds.cert_file.read_bytes())
    assert cert.issuer == ca.subject
    ca.public_key().verify(
        cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
    )
    other = x509.load_pem_x509_certificate(
        create_credentials(tmp_path / "o", "x").ca_file.read_bytes()
    )
    assert other.subject != ca.subject or other.public_key() != ca.public_key()


def test_readable_key_is_refused(tmp_path):
    creds = create_credentials(tmp_path, "r3")
    creds.key_file.chmod(0o644)
    with pytest.raises(HpcflowError, match="can be read by other users"):
        security_for(tmp_path, "tls")


def test_security_needs_the_files_for_tls_only(tmp_path):
    assert security_for(tmp_path, "tcp") is None
    assert security_for(tmp_path, "ucx") is None
    with pytest.raises(ProfileError, match="certificates are missing"):
        security_for(tmp_path, "tls")
    create_credentials(tmp_path, "r4")
    security = security_for(tmp_path, "tls")
    assert security is not None and security.require_encryption
    assert security.tls_client_cert == str(credentials_in(tmp_path).cert_file)


def test_transport_choice_warns_or_refuses(caplog):
    with caplog.at_level(logging.WARNING):
        check_choice("tls", require_encryption=True, shared_machine=True)
        assert not caplog.records
        check_choice("tcp", require_encryption=False, shared_machine=False)
        assert not caplog.records
        check_choice("tcp", require_encryption=False, shared_machine=True)
        check_choice("ucx", require_encryption=False, shared_machine=True)
    text = caplog.text
    assert "no authentication" in text and "not encrypted" in text
    with pytest.raises(ProfileError, match="not encrypted") as info:
        check_choice("ucx", require_encryption=True, shared_machine=False)
    assert "no TLS" in info.value.hint


def test_profile_worker_knobs():
    profile = Profile(
        name="p",
        worker_memory_target="0.6",
        worker_memory_spill="false",
        worker_lifetime="2h",
        worker_lifetime_stagger="5m",
        worker_resources={"licence": "2"},
    )
    assert profile.worker_memory_target == 0.6 and profile.worker_memory_spill is False
    assert (profile.worker_lifetime, profile.worker_lifetime_stagger) == (7200.0, 300.0)
    assert profile.worker_resources == {"licence": 2.0}
    assert Profile(name="p").transport == "tls"
    for bad in (0, 1.5, "lots", True):
        with pytest.raises(ValueError, match="fraction"):
            Profile(name="p", worker_memory_pause=bad)


def test_dashboard_and_tunnel(tmp_path):
    scheduler = tmp_path / "scheduler.json"
    assert find_dashboard(scheduler) is None
    scheduler.write_text(json.dumps({"address": "tls://10.0.0.7:4000", "dashboard": None}))
    assert find_dashboard(scheduler) is None
    scheduler.write_text(
        json.dumps({"address": "tls://10.0.0.7:4000", "dashboard": "http://10.0.0.7:40123/status"})
    )
    found = find_dashboard(scheduler, login_host="login.example.org")
    assert found is not None
    assert found.url == "http://10.0.0.7:40123/status"
    assert found.tunnel is not None
    assert found.tunnel.startswith("ssh -N -L 40123:10.0.0.7:40123 ")
    assert found.tunnel.endswith("login.example.org")
    assert found.local_url == "http://localhost:40123/status"
