"""What the OpenAPI document says `POST /api/chat` and `/api/chat/stream` take: JSON or
multipart/form-data with the files (the handlers read the body themselves, as it
streams, so Litestar cannot infer it)."""

from __future__ import annotations

from dataclasses import dataclass

from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)
from litestar.openapi.spec.encoding import Encoding

from skald.features.chat.form import MAX_ATTACHMENTS


def _fields(*, files: bool) -> Schema:
    properties: dict[str, Schema] = {
        "text": Schema(type=OpenAPIType.STRING, max_length=100_000),
        "conversation_id": Schema(
            one_of=[Schema(type=OpenAPIType.STRING, max_length=64), Schema(type=OpenAPIType.NULL)],
            description="The conversation to continue; none: a new one.",
        ),
        "attachments": Schema(
            type=OpenAPIType.ARRAY,
            items=Schema(type=OpenAPIType.STRING, max_length=400),
            max_items=MAX_ATTACHMENTS,
            description="Paths uploaded to this conversation before (`POST /api/uploads`).",
        ),
    }
    if files:
        properties["conversation_id"] = Schema(
            type=OpenAPIType.STRING,
            max_length=64,
            description="The conversation to continue (before the files); none: a new one.",
        )
        properties["file"] = Schema(
            type=OpenAPIType.ARRAY,
            items=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY),
            max_items=MAX_ATTACHMENTS,
            description="Files sent with the message, within the upload size "
            "(`assistant.upload_max_mb` for the whole body) and the storage quota; "
            "they land in uploads/<conversation>/.",
        )
    return Schema(
        type=OpenAPIType.OBJECT,
        required=["text"],
        properties=properties,  # type: ignore[arg-type]
        additional_properties=False,
    )


def chat_request_body() -> RequestBody:
    return RequestBody(
        required=True,
        content={
            "application/json": OpenAPIMediaType(schema=_fields(files=False)),
            "multipart/form-data": OpenAPIMediaType(
                schema=_fields(files=True),
                encoding={"file": Encoding(content_type="application/octet-stream")},
            ),
        },
    )


@dataclass
class ChatOperation(Operation):
    """The chat routes' operation, with the request body they read themselves."""

    def __post_init__(self) -> None:
        self.request_body = chat_request_body()
