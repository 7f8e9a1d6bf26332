"""See what every replica of a job gets: address, TF_CONFIG task, CLUSTER_SPEC, TF_CONFIG and
the PyTorch variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK).

Everything comes from `cluster.replicas`, the function the runner and `vtrain
inspect` use, so the inspector shows exactly what a replica will read, but for the
values of the job's `env`: they are `***` (a saved notebook keeps what it shows).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from ipywidgets import HTML, Dropdown, HBox, Layout, Text, ToggleButtons, VBox
from traitlets import Bool, Enum, Instance, Unicode, observe

from jupyter_ext import cluster, names, validate
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.spec import JobSpec

from . import _html
from .pools import PoolConfigurator
from .tables import env_json, inspector_frame
from .topology import topology_svg

_COLUMN_TITLES = ["task name", "role", "index", "address", "TF_CONFIG task"]


class ClusterInspector(_html.StaticRepr, VBox):
    """Replicas of a job (anything `JobSpec.load` accepts, or a `PoolConfigurator`,
    whose changes it follows), the selected replica's CLUSTER_SPEC, TF_CONFIG and
    PyTorch variables, and a picture of the cluster."""

    job = Instance(JobSpec, allow_none=True, help="the job shown")
    legacy = Bool(False, help="AI Platform's names (master), as a trainingInput job got them there, if True; "
                              "Vertex AI's (chief), which every job gets when it runs, if False")
    style = Enum(names.ADDRESS_STYLES, "cloud", help="address style: cloud, process or docker")
    trial = Unicode("", help="hyperparameter tuning trial number; empty outside tuning")
    selected = Unicode("", help="task name of the replica whose environment is shown")

    def __init__(self, job: Any = None, **kwargs: Any) -> None:
        self._ready = self._rendering = False
        self._replicas: list[cluster.Replica] = []
        self._error = ""
        self.source = job if isinstance(job, PoolConfigurator) else None
        self.legacy_toggle = ToggleButtons(options=[("Vertex AI (chief)", False), ("AI Platform (master)", True)],
                                           style={"button_width": "150px"})
        self.style_toggle = ToggleButtons(options=list(names.ADDRESS_STYLES), description="Addresses",
                                          style={"button_width": "80px"})
        self.trial_text = Text(description="Trial", placeholder="none", continuous_update=False,
                               style={"description_width": "40px"}, layout=Layout(width="140px"))
        self.replica_picker = Dropdown(description="Replica", layout=Layout(width="300px"),
                                       style={"description_width": "60px"})
        for control, trait in ((self.legacy_toggle, "legacy"), (self.style_toggle, "style"),
                               (self.trial_text, "trial"), (self.replica_picker, "selected")):
            control.observe(lambda change, trait=trait: self._control_changed(trait, change["new"]), names="value")
        self.problems_html, self.table_html, self.env_html, self.picture = HTML(), HTML(), HTML(), HTML()
        super().__init__(**kwargs)
        if self.source is not None:
            self.job = self.source.job
            self.source.observe(self._follow, names="job")
        elif job is not None:
            self.job = JobSpec.load(job)
        self.children = [
            HBox([self.legacy_toggle, self.style_toggle, self.trial_text], layout=Layout(flex_flow="row wrap")),
            self.problems_html, self.table_html, self.replica_picker, self.env_html,
            HTML(_html.heading("Topology")), self.picture,
        ]
        self._ready = True
        self._refresh()

    # ---- data -----------------------------------------------------------------
    @property
    def replicas(self) -> list[cluster.Replica]:
        return list(self._replicas)

    @property
    def table(self) -> pd.DataFrame:
        """task_name, role, index, address (as `vtrain inspect --json`) and tf_config_task ("chief:0", "-")."""
        return inspector_frame(self._replicas)

    @property
    def selected_replica(self) -> cluster.Replica | None:
        return next((r for r in self._replicas if r.task_name == self.selected), None)

    def svg(self) -> str:
        return topology_svg(self._replicas) if self._replicas else ""

    # ---- events -----------------------------------------------------------------
    def _control_changed(self, trait: str, value: Any) -> None:
        if not self._rendering:
            setattr(self, trait, value)

    def _follow(self, change: dict[str, Any]) -> None:
        self.job = change["new"]

    @observe("job", "legacy", "style", "trial", "selected")
    def _changed(self, _change: Any) -> None:
        if self._ready and not self._rendering:
            self._refresh()

    # ---- view -------------------------------------------------------------------
    def _compute(self) -> None:
        self._replicas, self._error = [], ""
        if self.job is None:
            self._error = "no job (the pools cannot be read; see their validation messages)"
            return
        try:
            self._replicas = cluster.replicas(self.job, style=self.style, trial=self.trial.strip() or None,
                                              legacy=self.legacy, mask_env=True)
        except (WorkbenchError, IndexError) as exc:  # IndexError: a job with no pools at all
            self._error = f"no replicas: {exc}"

    def _refresh(self) -> None:
        self._rendering = True
        try:
            self._compute()
            names = [r.task_name for r in self._replicas]
            if self.selected not in names:
                self.selected = names[0] if names else ""
            self.legacy_toggle.value = self.legacy
            self.style_toggle.value = self.style
            self.trial_text.value = self.trial
            self.replica_picker.options = names
            self.replica_picker.value = self.selected or None
        finally:
            self._rendering = False
        problems = validate.problems(self.job) if self.job is not None else []
        self.problems_html.value = (_html.note(self._error, _html.RED) if self._error else
                                    _html.problem_list(problems) if problems else "")
        self.table_html.value = _html.frame(self.table, header=_COLUMN_TITLES) if self._replicas else ""
        self.env_html.value = self._env_html()
        self.picture.value = self.svg()

    def _env_html(self) -> str:
        replica = self.selected_replica
        if replica is None:
            return ""
        tf_config = env_json(replica, "TF_CONFIG")
        if not tf_config:
            why = "single-replica job" if len(self._replicas) == 1 else "not a TensorFlow task"
            tf_config_html = _html.note(f"not set ({why})")
        else:
            tf_config_html = _html.pre(tf_config, max_height="420px")
        pytorch_html = _html.heading(f"PyTorch variables of {replica.task_name}") + _pytorch_html(replica)
        return _html.side_by_side((f"CLUSTER_SPEC of {replica.task_name}",
                                   _html.pre(env_json(replica, "CLUSTER_SPEC"), max_height="420px")),
                                  (f"TF_CONFIG of {replica.task_name}", tf_config_html + pytorch_html))

    def to_html(self) -> str:
        mode = "AI Platform (legacy)" if self.legacy else "Vertex AI"
        name = self.job.display_name if self.job is not None else "no job"
        title = _html.heading(f"Cluster of {name}: {len(self._replicas)} replica(s), {self.style} addresses, {mode}")
        return (f'<div class="vtrain-inspector">{title}{self.problems_html.value}{self.table_html.value}'
                f"{self.env_html.value}{_html.heading('Topology')}{self.picture.value}</div>")

    def to_text(self) -> str:
        if not self._replicas:
            return self._error or "no replicas"
        return self.table.to_string(index=False)


def _pytorch_html(replica: cluster.Replica) -> str:
    """`NAME=value` lines of the replica's PyTorch variables; a replica outside the training
    cluster (an evaluator, a Reduction Server replica) has no rank, and the note says why."""
    lines = "\n".join(f"{name}={replica.env[name]}" for name in cluster.PYTORCH_VARIABLES if name in replica.env)
    html = _html.pre(lines)
    if "RANK" not in replica.env:
        role = replica.role.replace("_", " ")
        html += _html.note(f"no RANK or WORLD_SIZE: {role} replicas are not in the training cluster")
    return html
