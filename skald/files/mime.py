"""What a file is, judged by its first bytes (never by the name or what a browser claims)."""

from __future__ import annotations

_MAGIC: list[tuple[bytes, int, str]] = [
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),
    (b"WAVE", 8, "audio/wav"),
    (b"%PDF-", 0, "application/pdf"),
    (b"PK\x03\x04", 0, "application/zip"),
    (b"ID3", 0, "audio/mpeg"),
    (b"OggS", 0, "audio/ogg"),
    (b"ftypqt", 4, "video/quicktime"),  # before any other ftyp: a .mov
    (b"ftyp", 4, "video/mp4"),
    (b"fLaC", 0, "audio/flac"),
    (b"\x1aE\xdf\xa3", 0, "video/webm"),  # Matroska/WebM: what browsers record
]


def sniff(head: bytes) -> str:
    for magic, offset, mime in _MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return mime
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        # A multi-byte character cut at the end of the sample is still text.
        try:
            head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return "application/octet-stream"
    return "text/plain"
