"""Model folders kept in the database, so that every process reads what one of them built.

A built static model is published as a zip archive under its folder's name; a process that
finds no such folder on its own disk restores it from there before it would build one. No
process then depends on a file only another process's disk holds.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import zipfile
from pathlib import Path

from sqlalchemy import select

from omniroute.core.clock import now_iso
from omniroute.core.db import Database
from omniroute.core.db.tables import model_files


class SharedModels:
    def __init__(self, database: Database) -> None:
        self.db = database

    def publish(self, folder: Path) -> None:
        """Keep `folder` (a built model) in the database under its name, replacing any."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(folder).as_posix())
        statement = self.db.insert(model_files).values(
            name=folder.name, archive=buffer.getvalue(), created_at=now_iso()
        )
        with self.db.write() as conn:
            conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[model_files.c.name],
                    set_={"archive": statement.excluded.archive, "created_at": now_iso()},
                )
            )

    def has(self, name: str) -> bool:
        with self.db.read() as conn:
            found = conn.execute(select(model_files.c.name).where(model_files.c.name == name))
            return found.first() is not None

    def restore(self, target: Path) -> bool:
        """Unpack the model named like `target` into it; False when the database has none.

        Unpacked beside the target, then renamed into place: never a half-written folder.
        """
        with self.db.read() as conn:
            archive = conn.execute(
                select(model_files.c.archive).where(model_files.c.name == target.name)
            ).scalar()
        if archive is None:
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        unpacked = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        with zipfile.ZipFile(io.BytesIO(archive)) as files:
            for member in files.namelist():  # only plain relative paths inside the folder
                if member.startswith("/") or ".." in Path(member).parts:
                    raise ValueError(f"unsafe path {member!r} in model archive {target.name}")
            files.extractall(unpacked)
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
        return True
