"""Submit, watch, cancel and read the logs of jobs, through the official clients only.

One code path for both places a job can run: the `google-cloud-aiplatform` job
client and the `google-cloud-logging` client talk either to Vertex AI and Cloud
Logging or, for local jobs, to the workbench's local service, which speaks the
same REST API.

- `target`: where jobs run (`Target.resolve`) and the clients that reach it (`Session`);
- `preflight`: what Vertex AI would refuse, found before anything is built, uploaded or created;
- `prepare`: a validated job made ready for its target;
- `handles`: handles on CustomJobs and tuning jobs; submit, attach, list;
- `logs`: the log filter, the cursor and the follower;
- `rows`: a job as a table row.
"""

from ..api import CUSTOM_JOBS, LOCAL_PROJECT, TUNING_JOBS, Collection
from . import preflight
from .handles import (Handle, TrialHandle, TuningHandle, attach, attach_any, attach_tuning, list_jobs, list_jobs_page,
                      submit, submit_tuning, tuning_request)
from .logs import LogCursor, LogReader, LogRecord, log_filter
from .rows import job_row
from .target import Session, Target

__all__ = ["preflight", "CUSTOM_JOBS", "TUNING_JOBS", "Collection", "Handle", "TrialHandle", "TuningHandle", "attach",
           "attach_any", "attach_tuning", "list_jobs", "list_jobs_page", "submit", "submit_tuning", "tuning_request",
           "LogCursor", "LogReader", "LogRecord", "log_filter", "job_row", "LOCAL_PROJECT", "Session", "Target"]
