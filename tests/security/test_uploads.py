"""Hostile uploads through the real BotService over gRPC: link chains, lying archives, quotas.

A "user" here is the holder of a bot's token: tokens are issued per bot name, so the
per-user quotas are the per-bot ones, plus a cap on all submitted bots together.
"""

from __future__ import annotations

import io
import stat
import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import grpc
import pytest

from arena.v1 import bots_pb2_grpc as bp_grpc
from arena_server.bots import registry as bot_registry
from arena_server.bots.uploads import UploadError, _check_link, unpack_upload
from tests.conftest import LiveServer
from tests.server.test_bot_registry import PLAIN_BOT, bots, data_dir, register, submit

__all__ = ["bots", "data_dir"]  # fixtures shared with the registry tests


def zip_with(files: dict[str, bytes], links: Mapping[str, str] = MappingProxyType({})) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        for name, target in links.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return buffer.getvalue()


async def version_status(live_server: LiveServer, name: str) -> list[tuple[int, str]]:
    sql = "SELECT v.version, v.status FROM bot_versions v JOIN bots b ON b.id = v.bot_id WHERE b.name = ? ORDER BY 1"
    async with live_server.store.conn.execute(sql, (name,)) as cur:
        return [(int(r[0]), str(r[1])) for r in await cur.fetchall()]


async def refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value


# d/up -> ".." is the upload's root; b -> "d/up/../etc" looks like "d/etc" to a lexical check,
# but is <parent of the upload>/etc once d/up is followed; a -> b chains it.
CHAIN = {"d/up": "..", "b": "d/up/../etc", "a": "b"}


def test_the_link_chain_passes_a_lexical_check_but_not_the_real_one(tmp_path: Path) -> None:
    for name, target in CHAIN.items():
        _check_link(name, target)  # each link on its own looks harmless: the attack is real
    with pytest.raises(UploadError, match="leads outside the upload"):
        unpack_upload("bot.zip", zip_with({"bot.py": PLAIN_BOT, "d/keep": b""}, CHAIN), tmp_path)


async def test_symlink_chain_escaping_the_upload_is_refused(
    live_server: LiveServer, bots: bp_grpc.BotServiceStub, data_dir: Path
) -> None:
    token = await register(bots, "chained")
    upload = zip_with({"bot.py": PLAIN_BOT, "d/keep": b""}, CHAIN)
    error = await refused(submit(bots, "chained", token, upload, filename="bot.zip"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "leads outside the upload" in (error.details() or "")
    assert await version_status(live_server, "chained") == [(1, "rejected")]
    assert not (data_dir / "bots" / "chained" / "v1").exists()


async def test_zip_whose_header_lies_about_sizes_is_a_clear_error(
    live_server: LiveServer, bots: bp_grpc.BotServiceStub, data_dir: Path
) -> None:
    token = await register(bots, "liar")
    data = bytearray(zip_with({"bot.py": PLAIN_BOT + b"#" * 100_000}))
    struct.pack_into("<I", data, 22, 10)  # the local header's uncompressed size
    central = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, 10)  # and the central directory's
    error = await refused(submit(bots, "liar", token, bytes(data), filename="bot.zip"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert "damaged or its headers are wrong" in (error.details() or "")
    assert await version_status(live_server, "liar") == [(1, "rejected")]


async def test_versions_per_bot_are_capped(
    live_server: LiveServer, bots: bp_grpc.BotServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bot_registry, "MAX_VERSIONS_PER_BOT", 3)
    token = await register(bots, "prolific")
    for _ in range(3):  # quick rejected versions (not a zip): they count too
        error = await refused(submit(bots, "prolific", token, b"PK not a zip", filename="bot.zip"))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    error = await refused(submit(bots, "prolific", token, PLAIN_BOT))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "already has 3 versions, the limit per bot" in (error.details() or "")
    assert len(await version_status(live_server, "prolific")) == 3


@pytest.mark.parametrize("quota", ["MAX_BYTES_PER_BOT", "MAX_DATA_DIR_BYTES"])
async def test_bytes_per_bot_and_in_all_are_capped(
    live_server: LiveServer, bots: bp_grpc.BotServiceStub, data_dir: Path, monkeypatch: pytest.MonkeyPatch, quota: str
) -> None:
    monkeypatch.setattr(bot_registry, quota, 1 << 20)
    token = await register(bots, "bulky")
    upload = zip_with({"bot.py": PLAIN_BOT, "data.bin": b"\0" * (2 << 20)})  # compresses to a few KiB
    error = await refused(submit(bots, "bulky", token, upload, filename="bot.zip"))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "over its limit" in (error.details() or "") or "the limit per bot is 1 MiB" in (error.details() or "")
    assert await version_status(live_server, "bulky") == [(1, "rejected")]
    assert not (data_dir / "bots" / "bulky" / "v1").exists()


async def test_uploads_refused_without_a_sandbox_say_why(live_server: LiveServer, bots: bp_grpc.BotServiceStub) -> None:
    registry = live_server.hub.registry
    assert registry is not None
    await bot_registry.check_sandbox(registry, allow_unsandboxed=False)
    assert registry.uploads_refused is None, "this machine has a sandbox: uploads stay open"
    token = await register(bots, "careful")
    registry.uploads_refused = "this server cannot sandbox uploaded bots on its kernel"
    error = await refused(submit(bots, "careful", token, PLAIN_BOT))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "cannot sandbox" in (error.details() or "")
