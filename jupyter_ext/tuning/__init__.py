"""Hyperparameter tuning studies: parameters, sampling, trial jobs and metrics.

Plain functions over the API's own types (`v1.StudySpec`, `v1.Trial`,
`v1.Measurement`, `v1.HyperparameterTuningJob`); the local service's tuning
manager, the CLI, the magic and the widget use them as `tuning.<name>`.

- `params`: the short forms (`--tune "lr=double:1e-4:1e-1:log, units=int:16:128,
  opt=categorical:adam,sgd"`, `--metric accuracy:maximize`) become a `StudySpec`
  (`study_spec`); a REST body becomes the message (`load_request`); a legacy
  AI Platform `hyperparameters` becomes the study and trial counts and back
  (`from_legacy_hyperparameters`, `to_legacy_hyperparameters`); the shared
  names (`Param`, `Algorithm`, `Scale`, `Goal`, ...).
- `search`: the trials' parameters, made on demand (`suggestions`): random
  search seeded with the tuning job's ID, grid search spread evenly over the
  whole grid; `notices` says what runs differently than on Vertex AI.
- `trials`: a trial's job (`trial_job`): its parameters reach every replica as
  `--name=value` arguments (a Reduction Server pool gets none).
- `metrics`: cloudml-hypertune reports, measurements, each trial's final
  measurement, and the best trial.
- The rules live in `validate` (`validate.tuning_problems`, `validate.check_tuning`):
  one line per problem naming the field, e.g.
  `studySpec.parameters[1].doubleValueSpec.minValue: must be below maxValue`;
  the trial job is checked with the same rules as any CustomJob.
- `maxFailedTrialCount`: "the number of failed Trials that need to be seen
  before failing" the job, so the job fails at the N-th failed trial; 0
  ("Vertex AI decides") sets no limit locally, and the job fails only when no
  trial succeeded.
"""

from .metrics import (
    DEFAULT_METRIC_FILE,
    DEFAULT_METRIC_TAG,
    METRIC_FILE_ENV,
    Report,
    best_trial,
    final_measurement,
    measurements,
    metric_value,
    parse_reports,
    read_reports,
    summary,
)
from .params import (
    ALGORITHMS,
    KINDS,
    SCALES,
    Algorithm,
    Goal,
    Param,
    Scale,
    Selection,
    Study,
    TrialState,
    from_legacy_hyperparameters,
    load_request,
    parse_algorithm,
    parse_metrics,
    parse_parameters,
    study_spec,
    to_legacy_hyperparameters,
)
from .search import BAYESIAN_NOTICE, notices, search_name, suggestions
from .trials import (format_value, metric_name, parameters_of, stop_reason, trial_args, trial_base_job, trial_ended,
                     trial_job, trial_job_state, trial_parameters, trial_state_label)

__all__ = [
    "ALGORITHMS", "BAYESIAN_NOTICE", "DEFAULT_METRIC_FILE", "DEFAULT_METRIC_TAG", "KINDS", "METRIC_FILE_ENV",
    "SCALES", "Algorithm", "Goal", "Param", "Report", "Scale", "Selection", "Study", "TrialState",
    "best_trial", "final_measurement", "format_value", "from_legacy_hyperparameters", "load_request", "measurements",
    "metric_name", "metric_value", "notices",
    "parameters_of", "parse_algorithm", "parse_metrics", "parse_parameters", "parse_reports", "read_reports",
    "search_name", "stop_reason", "study_spec", "suggestions", "summary", "trial_args", "trial_base_job",
    "to_legacy_hyperparameters", "trial_ended", "trial_job", "trial_job_state", "trial_parameters", "trial_state_label",
]
