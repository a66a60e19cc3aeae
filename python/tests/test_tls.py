# SPDX-License-Identifier: Apache-2.0
"""TLS from Python: certificates made with the openssl commands docs/security.md gives, a node
with TLS on its TCP port, kvport.Client with tls_ca_file, and the eic drop-in taking the CA from
KVPORT_TLS_CA_FILE."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import eic
import kvport

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="the openssl command is not installed")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """docs/security.md's recipe: a throwaway CA and a node certificate for localhost."""
    d = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-days", "30", "-subj", "/CN=kvport-ca", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
            "/CN=kvport-node", "-keyout", "node.key", "-out", "node.csr", cwd=d)
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "30", "-extfile", "san.ext", "-out", "node.pem", cwd=d)
    return d


@pytest.fixture
def tls_node(certificates):
    with kvport.Server(capacity="16MiB", threads=1, unix_socket="",
                       tls_cert_file=str(certificates / "node.pem"),
                       tls_key_file=str(certificates / "node.key")) as server:
        yield server


def test_a_client_with_the_ca_reads_what_it_wrote(tls_node, certificates):
    client = kvport.Client(f"localhost:{tls_node.port}", tls_ca_file=str(certificates / "ca.pem"),
                           transport_type=kvport.TransportType.TCP)
    value = bytes(range(256)) * 4096
    assert client.mset(["k"], [value]).codes == [kvport.KeyCode.SUCCESS]
    buffer = bytearray(len(value))
    assert client.mget(["k"], [buffer]).codes == [kvport.KeyCode.SUCCESS]
    assert bytes(buffer) == value
    assert client.stats()["counters"]["tls_handshakes"] >= 1


def test_a_client_without_the_ca_is_told_tls_is_required(tls_node):
    with pytest.raises(kvport.Error) as refused:
        kvport.Client(f"localhost:{tls_node.port}", transport_type=kvport.TransportType.TCP)
    assert refused.value.code == "PermissionDenied", refused.value
    assert "requires TLS" in str(refused.value)


def test_the_eic_drop_in_takes_the_ca_from_the_environment(tls_node, certificates, monkeypatch):
    option = eic.InitOption()
    option.transport_type = eic.TransportType.TRANSPORT_TCP
    endpoint = f"localhost:{tls_node.port}"
    assert eic.Client().init("t", endpoint, option) != 0
    monkeypatch.setenv("KVPORT_TLS_CA_FILE", str(certificates / "ca.pem"))
    client = eic.Client()
    assert client.init("t", endpoint, option) == 0
    status, _ = client.mset(["k"], [b"value"], eic.SetOption())
    assert status == eic.StatusCode.SUCCESS


def test_tls_verify_hostname_false_checks_the_chain_only(certificates):
    """A certificate the CA signed for another name: refused by name, taken by chain only when
    the client says tls_verify_hostname=False."""
    d = certificates
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
            "/CN=elsewhere", "-keyout", "other.key", "-out", "other.csr", cwd=d)
    (d / "other.ext").write_text("subjectAltName=DNS:elsewhere.example\n")
    openssl("x509", "-req", "-in", "other.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "30", "-extfile", "other.ext", "-out", "other.pem", cwd=d)
    (d / "other.key").chmod(0o600)
    with kvport.Server(capacity="16MiB", threads=1, unix_socket="",
                       tls_cert_file=str(d / "other.pem"),
                       tls_key_file=str(d / "other.key")) as server:
        endpoint = f"localhost:{server.port}"
        with pytest.raises(kvport.Error):
            kvport.Client(endpoint, tls_ca_file=str(d / "ca.pem"),
                          transport_type=kvport.TransportType.TCP)
        client = kvport.Client(endpoint, tls_ca_file=str(d / "ca.pem"), tls_verify_hostname=False,
                               transport_type=kvport.TransportType.TCP)
        assert client.mset(["k"], [b"v"]).codes == [kvport.KeyCode.SUCCESS]
