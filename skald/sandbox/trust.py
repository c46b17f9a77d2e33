"""Certificate trust inside the sandboxes against the host's (issue 23 item 9).

Rule: the containers trust the certificate authorities of the runtime image, not the
host's. On a network whose proxy inspects TLS the host trusts the proxy's authority
(its administrator added it) and the containers do not, so `npm ci`/`pip install` in a
sandbox fail with "self-signed certificate in certificate chain". Two places say so in
plain words, both naming `[connectors] extra_ca_file` (the PEM bundle Skald hands to
in-sandbox installs): a failing install whose output shows a certificate verification
failure (`install_failure`), and `skald doctor` (`untrusted_in_image`: the
authorities the host trusts that neither the image nor `extra_ca_file` holds).

Trap: certificates are compared by their DER bytes, not by the PEM text: bundles differ
in comments, line wrapping and order for the same authorities.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import ssl
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# What npm (OpenSSL's codes), pip/requests (Python's ssl) and curl print when a chain
# does not verify.
_CERT_FAILURE = re.compile(
    r"self[- ]signed certificate in certificate chain|SELF_SIGNED_CERT_IN_CHAIN"
    r"|CERTIFICATE_VERIFY_FAILED|certificate verify failed"
    r"|unable to get local issuer certificate|UNABLE_TO_GET_ISSUER_CERT_LOCALLY"
    r"|unable to verify the first certificate|UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    re.IGNORECASE,
)
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.DOTALL)
IMAGE_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
SETTING = "[connectors] extra_ca_file"
PROBE_LABEL = "skald.trust-probe"  # the short-lived container `image_bundle` reads from


def cert_failure(output: str) -> bool:
    """The output shows a certificate that did not verify."""
    return _CERT_FAILURE.search(output) is not None


def install_failure(tail: str, extra_ca_file: str) -> str:
    """The text of a failed in-sandbox install: a certificate failure says what to do."""
    if not cert_failure(tail):
        return f"installing the dependencies in your sandbox failed: {tail}"
    if extra_ca_file:
        return (
            "installing the dependencies in your sandbox failed: a certificate did not "
            f"verify although {SETTING} is set; it may not hold the authority of this "
            f"network's TLS-inspecting proxy ({tail})"
        )
    return (
        "installing the dependencies in your sandbox failed: a certificate did not verify. "
        "This network seems to inspect TLS, and the sandbox does not trust its "
        f"certificate as the server does: an administrator can set {SETTING} to the "
        f"server's certificate bundle (e.g. {IMAGE_BUNDLE}) ({tail})"
    )


def certificates(pem: bytes) -> set[bytes]:
    """The certificates of a PEM bundle, as DER bytes."""
    out = set()
    for block in _PEM.findall(pem):
        try:
            out.add(base64.b64decode(b"".join(block.split()), validate=True))
        except (binascii.Error, ValueError):
            continue
    return out


def host_bundle(environ: Mapping[str, str]) -> Path | None:
    """The bundle the host's OpenSSL trusts (`SSL_CERT_FILE`, else its default file)."""
    named = environ.get("SSL_CERT_FILE") or ssl.get_default_verify_paths().cafile
    if named and Path(named).is_file():
        return Path(named)
    fallback = Path(IMAGE_BUNDLE)
    return fallback if fallback.is_file() else None


def extra_problem(extra_ca_file: str) -> str | None:
    """Why `extra_ca_file` cannot serve (unreadable, no certificate), or None."""
    try:
        data = Path(extra_ca_file).read_bytes()
    except OSError as exc:
        return f"{SETTING} = {extra_ca_file} cannot be read ({exc.strerror or exc})"
    if not certificates(data):
        return f"{SETTING} = {extra_ca_file} holds no PEM certificate"
    return None


def image_bundle(docker_client: Any, image: str) -> bytes | None:
    """The runtime image's CA bundle, read from a created (never started) container:
    no network, nothing runs. None when the image has no such file."""
    import docker.errors

    container = docker_client.containers.create(
        image, command=["true"], network_disabled=True, labels={PROBE_LABEL: "1"}
    )
    try:
        try:
            stream, _ = container.get_archive(IMAGE_BUNDLE)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            while member is not None and not member.isfile():
                member = tar.next()  # a link: the archive holds its target next
            handle = tar.extractfile(member) if member is not None else None
            return handle.read() if handle is not None else None
    finally:
        container.remove(force=True)


def untrusted_in_image(host: bytes, image: bytes, extra: bytes = b"") -> int:
    """How many authorities the host trusts that the sandboxes would not."""
    return len(certificates(host) - certificates(image) - certificates(extra))
