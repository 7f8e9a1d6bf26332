"""Names and defaults a user picks from on the command line and in the widgets: job formats,
address styles, the flags that say where jobs run (the same on the magics and `vtrain`), the
default backend, tuning defaults. Nothing heavy is imported here, so `vtrain --help` can list
them before any client library is loaded."""

FORMATS = ("rest", "gcloud", "sdk", "legacy")  # job description formats (spec.JobSpec.load/dump)
GCLOUD_COMMAND = "gcloud-command"  # the export as a `gcloud ai custom-jobs create` command line (exports)
ADDRESS_STYLES = ("cloud", "process", "docker")  # how replicas' addresses look (cluster.replicas)
TUNING_TRIALS, TUNING_PARALLEL = 10, 1  # a tuning job's maxTrialCount and parallelTrialCount unless given
DEFAULT_BACKEND = "process"  # how local replicas run unless a job's label or --backend says (runner.backend)
MAX_FAILED_HELP = ("maxFailedTrialCount: the job fails at the N-th failed trial (default 0: Vertex AI decides; "
                   "locally, only when no trial succeeded)")

_WHERE = "default: see the README's 'Where jobs run'"
TARGET_FLAGS: dict[str, dict[str, str]] = {  # launch.Target.resolve takes their values
    "--vertex": {"action": "store_true", "help": "use Vertex AI (default: the local service, unless a flag only "
                 "Vertex AI uses is given; see the README's 'Where jobs run')"},
    "--project": {"metavar": "PROJECT", "help": f"use Vertex AI in this Google Cloud project ({_WHERE})"},
    "--region": {"metavar": "REGION", "help": f"Vertex AI region ({_WHERE})"},
    "--endpoint": {"metavar": "URL", "help": "a Vertex AI API endpoint other than Google's (for Cloud Logging too "
                   f"unless it is a Google host; {_WHERE})"},
    "--access-token-file": {"metavar": "FILE", "help": f"an OAuth access token to call Vertex AI with ({_WHERE})"},
}
STAGING_BUCKET_FLAG = ("--staging-bucket", {
    "metavar": "GS_URI", "help": "Vertex AI: the gs:// bucket that a cell's package or local packageUris are "
    f"uploaded to, and under which the job's outputs go unless it names a base output directory ({_WHERE})"})
