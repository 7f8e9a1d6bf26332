"""Names a user picks from on the command line and in the widgets: job formats and
address styles. Nothing heavy is imported here, so `vtrain --help` can list them
before any client library is loaded."""

FORMATS = ("rest", "gcloud", "sdk", "legacy")  # job description formats (spec.JobSpec.load/dump)
ADDRESS_STYLES = ("cloud", "process", "docker")  # how replicas' addresses look (cluster.replicas)
TUNING_TRIALS, TUNING_PARALLEL = 10, 1  # a tuning job's maxTrialCount and parallelTrialCount unless given
