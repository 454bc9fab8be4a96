"""Accessibility checks on rendered HTML, with the standard library's parser."""

from __future__ import annotations

from html.parser import HTMLParser

_FIELDS = {"input", "select", "textarea"}
_UNLABELLED_INPUTS = {"hidden", "submit", "button", "reset"}


class _Fields(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.label_targets: set[str] = set()
        self.fields: list[tuple[dict[str, str], bool]] = []  # attributes, inside a <label>
        self.ids: list[str] = []
        self._open_labels = 0

    def handle_starttag(self, tag, attrs):
        attributes = {name: value or "" for name, value in attrs}
        if "id" in attributes:
            self.ids.append(attributes["id"])
        if tag == "label":
            self._open_labels += 1
            if "for" in attributes:
                self.label_targets.add(attributes["for"])
        elif tag in _FIELDS and attributes.get("type") not in _UNLABELLED_INPUTS:
            self.fields.append((attributes, self._open_labels > 0))

    def handle_endtag(self, tag):
        if tag == "label":
            self._open_labels -= 1


def unlabelled_fields(html: str) -> list[str]:
    """Form fields with neither a <label> nor an aria-label, by name."""
    parser = _Fields()
    parser.feed(html)
    return [
        attributes.get("name", "?")
        for attributes, wrapped in parser.fields
        if not wrapped
        and attributes.get("id") not in parser.label_targets
        and not attributes.get("aria-label")
    ]


def duplicate_ids(html: str) -> list[str]:
    parser = _Fields()
    parser.feed(html)
    seen: set[str] = set()
    return [i for i in parser.ids if i in seen or seen.add(i)]
