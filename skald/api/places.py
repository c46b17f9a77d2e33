"""The request bodies that name a place in the household's files (a project, a shared
folder): what it is called, a line about it, and its path name.

Rule: both features take the same limits from here, so a name or path name that fits
one fits the other. Trap: each feature subclasses these under its own name (`ProjectIn`,
`FolderIn`, ...): the OpenAPI document names a body after its class, and the subclass
adds its own fields after these, in the order clients see them.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=80)]
Description = Annotated[str, msgspec.Meta(max_length=500)]
Slug = Annotated[str, msgspec.Meta(max_length=40)]


# A new place.
class PlaceIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    description: Description = ""
    slug: Slug | None = None  # the path name; made from the name when absent


# A change to a place: what is absent stays.
class PlacePatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name | None = None
    description: Description | None = None
