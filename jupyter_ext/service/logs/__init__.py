"""Cloud Logging's `entries.list` over the local replica logs.

Each replica's output is `<job dir>/logs/<task_name>.log` (see `runner.logs`); here
its lines become LogEntry dicts in proto3 JSON, shaped as Vertex AI writes them
(`resource.type="ml_job"`, `entries`), filtered with the Logging query language
(`query`) and paged (`listing`).

The filter language is the subset `gcloud ai custom-jobs stream-logs` and the
`google-cloud-logging` client use, with the Logging precedence: NOT binds
tightest, then OR, then implicit AND (whitespace), then AND, so `a OR b AND c`
is `(a OR b) AND c` (the client appends ` AND timestamp>=...` relying on that).
String comparisons are case-insensitive; `timestamp` compares as time,
`severity` by level. A filter, order or page token the service cannot use
raises `jupyter_ext.errors.FilterError`.

Listing reads only the replicas' own log files (named after a task; regular
files, a line at most MAX_RAW bytes at a time: `files`), only those a filter pins
(job ID, task name, trial) and only the time range it implies (a binary search
in each time-ordered file); it merges them with heapq.merge, read forwards for
ascending pages and backwards for descending ones, and ends a page after
PAGE_SECONDS with what it found and a token to go on.
"""

from .entries import line_to_entry
from .listing import list_entries
from .query import SEVERITIES, parse_filter, pinned

__all__ = ["SEVERITIES", "line_to_entry", "list_entries", "parse_filter", "pinned"]
