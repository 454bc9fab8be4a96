"""What one retrieval may see: the search partitions of its key, end user and the global
memories, and the session it is limited to (docs/scopes.md)."""

from __future__ import annotations

from dataclasses import dataclass

from omniroute.memory.model import owner_of


@dataclass(frozen=True)
class Reach:
    """What one retrieval may see: its partitions (model.owner_of), and of them only the
    memories of one session (and of none) when `session_id` is given, created at or after
    `created_after` when given."""

    owners: tuple[str, ...]
    session_id: str | None = None
    created_after: str | None = None

    @classmethod
    def of(
        cls,
        api_key_id: str,
        *,
        user_id: str = "",
        include_global: bool = False,
        session_id: str | None = None,
        created_after: str | None = None,
    ) -> Reach:
        """A key's shared memories, its end user's when named, the global ones when asked."""
        owners = [owner_of(api_key_id, user_id), api_key_id] if user_id else [api_key_id]
        if include_global and api_key_id:
            owners.append("")
        return cls(tuple(owners), session_id, created_after)

    def binds(self, now: str) -> dict:
        """The bind values of a statement over these partitions (search_conditions)."""
        return {"owners": list(self.owners), "now": now, "session": self.session_id,
                "after": self.created_after}  # fmt: skip
