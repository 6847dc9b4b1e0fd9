"""arq's per-job Redis plumbing, done for many jobs at once (``app.sending.steady_worker`` uses it).

arq 0.28 starts the jobs of one poll one at a time, each in four round trips (``WATCH`` the
job's in-progress key, ``EXISTS`` it, ``ZSCORE`` the job, then ``MULTI``/``PSETEX``/``EXEC``),
and ends each job with a ``MULTI`` of its own. With 200 jobs in flight those round trips were a
quarter of the worker's time (docs/benchmarks.md, change log).

- ``claim_many`` claims every job of a poll in one script, with arq's rule for each job: skip
  it if its in-progress key exists (another worker runs it), if it left the queue (done), or if
  its score is in the future (deferred again); else set the in-progress key for arq's
  in-progress timeout. A script runs atomically, as the ``WATCH`` block did, so two workers
  never both claim one job.
- ``Finishes`` ends the jobs that finish in the same moment in one ``MULTI``, each with exactly
  the commands arq's ``finish_job`` sends for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis
from arq.constants import (
    abort_jobs_ss,
    in_progress_key_prefix,
    job_key_prefix,
    result_key_prefix,
    retry_key_prefix,
)
from arq.utils import timestamp_ms, to_ms

from app.batching import Batcher

# KEYS[1] the queue, KEYS[i + 1] job i's in-progress key; ARGV[1] now (ms), ARGV[2] the
# in-progress timeout (ms), ARGV[i + 2] job i's id. Returns each job's score, or '' if skipped.
_CLAIM_MANY = """
local queue, now, timeout = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local scores = {}
for i = 1, #KEYS - 1 do
  local in_progress = KEYS[i + 1]
  local score = redis.call('ZSCORE', queue, ARGV[i + 2])
  if score and tonumber(score) ~= 0 and tonumber(score) <= now
      and redis.call('EXISTS', in_progress) == 0 then
    redis.call('PSETEX', in_progress, timeout, '1')
    scores[i] = score
  else
    scores[i] = ''
  end
end
return scores
"""


async def claim_many(
    redis: ArqRedis, queue: str, job_ids: Sequence[str], in_progress_ms: int
) -> list[int | None]:
    """Claim ``job_ids`` in one round trip: each one's queue score if it is now this worker's,
    else ``None``."""
    keys = [queue, *(in_progress_key_prefix + job_id for job_id in job_ids)]
    scores = await redis.register_script(_CLAIM_MANY)(
        keys=keys, args=[timestamp_ms(), in_progress_ms, *job_ids]
    )
    return [int(float(score)) if score else None for score in scores]


@dataclass(frozen=True)
class Finish:
    """One ``arq.worker.Worker.finish_job`` call's arguments."""

    job_id: str
    finish: bool
    result_data: bytes | None
    result_timeout_s: float | None
    keep_result_forever: bool
    incr_score: int | None
    keep_in_progress: float | None


def _queue_finish(tr: Any, queue: str, job: Finish) -> None:
    """arq 0.28's ``finish_job`` for one job, minus its ``execute``."""
    delete_keys = []
    in_progress_key = in_progress_key_prefix + job.job_id
    if job.keep_in_progress is None:
        delete_keys.append(in_progress_key)
    else:
        tr.pexpire(in_progress_key, to_ms(job.keep_in_progress))
    if job.finish:
        if job.result_data:
            expire = None if job.keep_result_forever else job.result_timeout_s
            tr.set(result_key_prefix + job.job_id, job.result_data, px=to_ms(expire))
        delete_keys += [retry_key_prefix + job.job_id, job_key_prefix + job.job_id]
        tr.zrem(abort_jobs_ss, job.job_id)
        tr.zrem(queue, job.job_id)
    elif job.incr_score:
        tr.zincrby(queue, job.incr_score, job.job_id)
    if delete_keys:
        tr.delete(*delete_keys)


class Finishes:
    """Jobs finishing in the same moment share one ``MULTI`` (``app.batching``). Each caller
    returns once its own job's commands are executed; a Redis error reaches every caller of the
    batch, as it would have reached each alone."""

    def __init__(self, redis: Callable[[], ArqRedis], queue: str) -> None:
        """``redis()``: the worker's pool at the time of each batch."""
        self._queue = queue
        self._batcher: Batcher[ArqRedis] = Batcher(
            lambda: nullcontext(redis()), isolate_failures=False
        )

    async def finish(self, job: Finish) -> None:
        await self._batcher.run(self._finish_all, job)

    async def _finish_all(self, redis: ArqRedis, jobs: Sequence[Finish]) -> list[None]:
        async with redis.pipeline(transaction=True) as tr:
            for job in jobs:
                _queue_finish(tr, self._queue, job)
            await tr.execute()
        return [None] * len(jobs)
