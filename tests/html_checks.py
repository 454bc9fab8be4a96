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


class _Text(HTMLParser):
    """The text inside the element with one id (whitespace collapsed)."""

    def __init__(self, element_id: str) -> None:
        super().__init__()
        self._id = element_id
        self._depth = 0  # >0 inside the element
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if self._depth:
            self._depth += tag not in _VOID
        elif dict(attrs).get("id") == self._id:
            self._depth = 1

    def handle_endtag(self, tag):
        if self._depth and tag not in _VOID:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.parts.append(data)


_VOID = {"input", "br", "img", "meta", "link", "hr", "source", "wbr", "area", "col"}


def text_of(html: str, selector: str) -> str:
    """The visible words of `#id` in a page, for asserting what a person would read."""
    parser = _Text(selector.removeprefix("#"))
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())
