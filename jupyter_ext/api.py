"""The Vertex AI API's job collections, as the client and the local service both name them, and
the project local jobs belong to."""

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

    def console_url(self, project: str, region: str, job_id: str) -> str:
        return self.console.format(region=region, job=job_id) + f"?project={project}"


CUSTOM_JOBS = Collection("customJobs", "CustomJob", v1.CustomJob, "custom_job", _CONSOLE + "/cpu",
                         "aiplatform-custom-job")
TUNING_JOBS = Collection("hyperparameterTuningJobs", "HyperparameterTuningJob", v1.HyperparameterTuningJob,
                         "hyperparameter_tuning_job", _CONSOLE, "aiplatform-hyperparameter-tuning-job")
