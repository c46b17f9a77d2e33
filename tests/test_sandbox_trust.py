"""Certificate trust in the sandboxes against the host's (issue 23 item 9): a network
whose proxy inspects TLS breaks `npm ci`/`pip install` inside sandboxes, because the
host trusts the proxy's authority and the runtime image does not. A failing install
says so and names `[connectors] extra_ca_file`; `skald doctor` compares the host's
bundle with the real runtime image's (read from a created container, nothing runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
from certs import self_signed
from conftest import PASSWORD
from connector_support import in_state
from sandbox_support import docker_fixture, sandbox_runtime_fixture  # noqa: F401

from skald.config import Config
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.service import DEFAULT_FEED, ConnectorsConfig
from skald.ops.checks_base import Context
from skald.ops.checks_host import check_sandbox_trust
from skald.paths import DataLayout
from skald.sandbox import trust
from skald.sandbox.image import image_tag

# What the installers print on such a network (npm 10, pip 25), cut as the supervisor cuts.
NPM = "npm error code SELF_SIGNED_CERT_IN_CHAIN | npm error self-signed certificate in certificate chain"
PIP = (
    "WARNING: Retrying ... SSLError(SSLCertVerificationError(1, '[SSL: "
    "CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate in "
    "certificate chain (_ssl.c:1006)'))"
)


def _authority(tmp: Path, name: str) -> Path:
    """A PEM file holding one self-signed certificate authority (the proxy's, say)."""
    return self_signed(tmp, name)[0]


def test_a_certificate_failure_in_an_install_names_extra_ca_file_and_others_do_not() -> None:
    for output in (NPM, PIP):
        text = trust.install_failure(output, "")
        assert "[connectors] extra_ca_file" in text and "TLS" in text
        assert output in text  # the installer's own words stay
        assert "may not hold" in trust.install_failure(output, "/etc/ca.pem")
    plain = trust.install_failure("npm error code E404 | npm error 404 Not Found", "")
    assert "extra_ca_file" not in plain and "404 Not Found" in plain


def test_bundles_are_compared_by_certificate_not_by_text(tmp_path: Path) -> None:
    a = _authority(tmp_path, "proxy").read_bytes()
    b = _authority(tmp_path, "other").read_bytes()
    # The same authority rewrapped and with a comment is the same; a new one is not.
    body = a.decode().splitlines()
    rewrapped = ("# a comment\n" + "\n".join([body[0], "".join(body[1:-1]), body[-1]])).encode()
    assert trust.untrusted_in_image(a, rewrapped) == 0
    assert trust.untrusted_in_image(a + b, rewrapped) == 1
    assert trust.untrusted_in_image(a + b, rewrapped, b) == 0


def _context(tmp: Path, host_bundle: Path, extra: str, docker: Any) -> Context:
    config = Config(extensions={"connectors": ConnectorsConfig(extra_ca_file=extra)})
    ctx = Context(
        layout=DataLayout(tmp / "data"),
        config=config,
        environ={"SSL_CERT_FILE": str(host_bundle)},
    )
    ctx.docker_client = docker
    return ctx


@pytest.mark.docker
async def test_doctor_warns_when_the_host_trusts_an_authority_the_runtime_image_does_not(
    tmp_path: Path, docker: Any
) -> None:
    image = (await asyncio.to_thread(trust.image_bundle, docker, image_tag())) or b""
    assert trust.certificates(image), "the runtime image has a CA bundle"
    same = tmp_path / "same.pem"
    same.write_bytes(image)
    proxy = _authority(tmp_path, "inspecting-proxy")
    host = tmp_path / "host.pem"
    host.write_bytes(image + proxy.read_bytes())

    # The host trusts the same authorities as the image: nothing to do.
    finding = await check_sandbox_trust(_context(tmp_path, same, "", docker))
    assert finding.status == "ok", finding
    # One more on the host (the proxy's): a warning whose fix sets extra_ca_file.
    finding = await check_sandbox_trust(_context(tmp_path, host, "", docker))
    assert finding.status == "warn" and "1 certificate authority" in finding.finding
    assert finding.fix is not None and f'extra_ca_file = "{host}"' in finding.fix
    # Handed to the sandboxes through extra_ca_file: fine.
    finding = await check_sandbox_trust(_context(tmp_path, host, str(proxy), docker))
    assert finding.status == "ok" and "extra_ca_file" in finding.finding
    # An extra_ca_file that cannot serve is a failure, whatever the bundles say.
    for bad in (tmp_path / "missing.pem", tmp_path / "empty.pem"):
        if bad.name == "empty.pem":
            bad.write_text("not a certificate\n")
        finding = await check_sandbox_trust(_context(tmp_path, same, str(bad), docker))
        assert finding.status == "fail" and str(bad) in finding.finding, finding
    # Nothing was left behind (the container was created, read and removed).
    left = await asyncio.to_thread(
        docker.containers.list, all=True, filters={"label": trust.PROBE_LABEL}
    )
    assert left == []


@pytest.mark.docker
@pytest.mark.timeout(600)
async def test_an_install_in_the_sandbox_that_meets_tls_inspection_says_to_set_extra_ca_file(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    """On a network that inspects TLS (this machine's: the host trusts an authority the
    image does not), the real `npm ci` in the member's container fails on a certificate;
    the card and the catalogue row then name the setting instead of npm's last lines."""
    host = trust.host_bundle({})
    image = await asyncio.to_thread(trust.image_bundle, docker, image_tag())
    if host is None or image is None or not trust.untrusted_in_image(host.read_bytes(), image):
        pytest.skip("this network does not inspect TLS: the install would succeed")
    runtime = sandbox_runtime
    created = await runtime.core.users.create("ada", PASSWORD, "member")
    c = service.require(runtime.server)
    c.config = msgspec.structs.replace(c.config, feed=str(DEFAULT_FEED), max_restarts=0)
    await c.installer.install(c.feed(), "everything")
    ada = created.user.id
    await c.store.set_active("everything", ada, True)
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    inst = await in_state(runtime, ada, "everything", "failed", seconds=500)
    assert inst.last_error is not None
    assert "[connectors] extra_ca_file" in inst.last_error, inst.last_error
    row = await c.store.require("everything")
    assert row.last_error is not None and "extra_ca_file" in row.last_error
