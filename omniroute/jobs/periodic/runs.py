"""The periodic jobs' shared record: who runs a job now, when it last ran, and how it went.

One `periodic_runs` row per job id, in the database every process shares, so that any number
of schedulers (RQ's cron in a clock process, a thread in each web process, an operator's
`flask jobs run`) may trigger a job and it still runs once per interval, never twice at once:

- a run first *claims* the row: a conditional UPDATE that succeeds only while no unexpired
  lease is held and (unless forced) the last run started at least 90% of an interval ago;
- a trigger that loses the claim is a skip, and says why;
- the finished run records its status, result (a small JSON object) or error, and duration,
  and lets go of the lease. A run that died keeps its lease until it expires.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from omniroute.core.clock import to_iso, utc_now
from omniroute.core.db import Database
from omniroute.core.db.tables import periodic_runs

# A trigger this much early still counts as on time (schedulers' clocks and sleeps drift).
DUE_SLACK = 0.1


@dataclass(frozen=True)
class Claim:
    job_id: str
    runner: str
    started_at: str


def runner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class PeriodicRuns:
    def __init__(self, database: Database, clock: Callable[[], datetime] = utc_now) -> None:
        self.db = database
        self.clock = clock

    def claim(
        self, job_id: str, *, interval: float, lease_seconds: float, force: bool = False
    ) -> Claim | str:
        """Take the job's row for one run, or say why not (another run holds it, or not due)."""
        now = self.clock()
        started = to_iso(now)
        runner = runner_name()
        with self.db.write() as conn:
            conn.execute(
                self.db.insert(periodic_runs)
                .values(job_id=job_id, runs=0, failures=0)
                .on_conflict_do_nothing(index_elements=[periodic_runs.c.job_id])
            )
            conditions = [
                periodic_runs.c.job_id == job_id,
                or_(periodic_runs.c.lease_until.is_(None), periodic_runs.c.lease_until <= started),
            ]
            if not force:
                due = to_iso(now - timedelta(seconds=interval * (1 - DUE_SLACK)))
                conditions.append(
                    or_(periodic_runs.c.started_at.is_(None), periodic_runs.c.started_at <= due)
                )
            taken = conn.execute(
                update(periodic_runs)
                .where(*conditions)
                .values(
                    lease_until=to_iso(now + timedelta(seconds=lease_seconds)),
                    runner=runner,
                    started_at=started,
                    status="running",
                )
            ).rowcount
            if taken:
                return Claim(job_id, runner, started)
            row = (
                conn.execute(select(periodic_runs).where(periodic_runs.c.job_id == job_id))
                .mappings()
                .one()
            )
        if row["lease_until"] is not None and row["lease_until"] > started:
            return f"another run ({row['runner']}) holds it until {row['lease_until']}"
        return f"not due: the last run started at {row['started_at']}"

    def finish(
        self, claim: Claim, *, result: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        """Record how the claimed run went and let go of its lease."""
        now = self.clock()
        started = datetime.fromisoformat(claim.started_at.replace("Z", "+00:00"))
        values: dict[str, Any] = {
            "lease_until": None,
            "finished_at": to_iso(now),
            "status": "failed" if error else "ok",
            "result": json.dumps(result or {}, ensure_ascii=False, default=str),
            "error": error,
            "duration_ms": max(0, round((now - started).total_seconds() * 1000)),
            "runs": periodic_runs.c.runs + 1,
        }
        if error:
            values["failures"] = periodic_runs.c.failures + 1
        with self.db.write() as conn:
            conn.execute(
                update(periodic_runs)
                .where(
                    periodic_runs.c.job_id == claim.job_id,
                    periodic_runs.c.runner == claim.runner,
                    periodic_runs.c.started_at == claim.started_at,
                )
                .values(**values)
            )

    def all(self) -> dict[str, dict[str, Any]]:
        """Every job's record by id (a job never run has none)."""
        with self.db.read() as conn:
            rows = conn.execute(select(periodic_runs)).mappings().all()
        records = {}
        for row in rows:
            record = dict(row)
            try:
                record["result"] = json.loads(row["result"]) if row["result"] else None
            except ValueError:
                record["result"] = None
            records[row["job_id"]] = record
        return records
