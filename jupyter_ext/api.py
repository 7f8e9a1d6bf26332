"""The Vertex AI API's job collections, as the client and the local service both name them, the
project local jobs belong to, and the names of the Cloud Logging entries a job's replicas write."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.cloud.aiplatform_v1 import types as v1

LOCAL_PROJECT = "local"  # the project of local jobs (also of those that ran outside the service, as `vtrain run`'s)
_CONSOLE = "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job}"


@dataclass(frozen=True)
class Collection:
    """One job collection of the Vertex AI API."""

    path: str  # in resource names, projects/P/locations/L/<path>/ID, and the key of its list responses
    kind: str  # the resource's type name, for messages
    resource_type: Any  # the v1 message
    method: str  # JobServiceClient methods: create_<method>, get_<method>, cancel_<method>, list_<method>s
    console: str  # the job's page in the Cloud console
    output_prefix: str  # the SDK's name for the base output directory under the staging bucket
    spec_field: str  # the resource's CustomJobSpec: the job's own, or each trial's

    def console_url(self, project: str, region: str, job_id: str) -> str:
        return self.console.format(region=region, job=job_id) + f"?project={project}"

    def spec_of(self, resource: Any) -> v1.CustomJobSpec:
        """What a job of this collection runs (for a tuning job: each trial)."""
        return getattr(resource, self.spec_field)


CUSTOM_JOBS = Collection("customJobs", "CustomJob", v1.CustomJob, "custom_job", _CONSOLE + "/cpu",
                         "aiplatform-custom-job", "job_spec")
TUNING_JOBS = Collection("hyperparameterTuningJobs", "HyperparameterTuningJob", v1.HyperparameterTuningJob,
                         "hyperparameter_tuning_job", _CONSOLE, "aiplatform-hyperparameter-tuning-job",
                         "trial_job_spec")

# Cloud Logging: the entries Vertex AI writes for a training job's replicas, as gcloud reads them
LOG_RESOURCE_TYPE = "ml_job"  # resource.labels: job_id, task_name (workerpool0-0), project_id
TASK_LABEL = "ml.googleapis.com/task_name"  # labels: the replica, and for a tuning trial its number
TRIAL_LABEL = "ml.googleapis.com/trial_id"
