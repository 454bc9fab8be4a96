"""The environment settings of the known memory backends (config.py adds them to its
registry): with a key set, the backend is registered under its id without a
`backendConfigs` entry, which wins when there is one of the same id."""

from __future__ import annotations

from omniroute.core.config.values import Setting, optional

BACKEND_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "OBSIDIAN_API_URL",
        "http://localhost:27123",
        "The Obsidian Local REST API of a vault, for the memory backend `obsidian`.",
    ),
    Setting(
        "OBSIDIAN_API_KEY",
        None,
        "Its API key; set, the backend `obsidian` is registered (choose it as primaryBackend "
        "or a fallback). Notes go to the folder `OmniRoute`.",
        optional,
    ),
    Setting(
        "NOTION_API_URL",
        "https://api.notion.com/v1",
        "The Notion API, for the memory backend `notion`.",
    ),
    Setting(
        "NOTION_API_KEY",
        None,
        "A Notion integration's secret; with NOTION_DATABASE_ID set too, the backend "
        "`notion` is registered.",
        optional,
    ),
    Setting(
        "NOTION_DATABASE_ID",
        None,
        "The Notion database that holds the memories (properties: docs/chat.md, Memory backends).",
        optional,
    ),
)
