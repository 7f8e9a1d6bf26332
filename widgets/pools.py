"""Lay out a job's worker pools, its scheduling and its access by pointing and clicking.

`PoolConfigurator` holds the UI state in traits, turns it into the core's `JobSpec`
with `layout_state.build_job`, and shows what the core says about that job in the
chosen region: validation problems and notices, the cost per hour of each pool and the job
(`cost.estimate`), the SDK's `worker_pool_specs`, the replicas (the first of each pool:
`tables.replica_frame`), and three of the core's exports
(gcloud command, SDK code, config.yaml). The job's env values are shown as *** (`sensitive.mask_job`)
unless the user ticks "Show env values" (the exports then show them). Each `PoolCard` shows
`pool_view.pool_view`, so the pickers offer only what the catalog offers in the region and say why
the rest is missing; the `AccessSection` ("Scheduling & access") shows `pool_view.access_view`.
"""

from __future__ import annotations

import copy
import html
import json
from functools import partial
from typing import Any, Callable

from ipywidgets import HTML, Box, Button, Checkbox, Dropdown, HBox, IntText, Layout, Text, ToggleButtons, VBox
from ipywidgets.widgets.widget import CallbackDispatcher
from traitlets import Bool, Dict, Enum, Instance, List, Unicode, default, observe

from jupyter_ext import catalog, cost, exports, packaging, sensitive
from jupyter_ext.spec import POOL_ROLES, JobSpec, is_reduction_server_pool, message_to_dict

from . import _html, layout_state, tables
from .pool_view import MODES, access_view, pool_view

_STYLE = {"description_width": "100px"}
_WIDE = Layout(width="440px")
# the export buttons: the configurator's names for them (`export("gcloud")`) -> `exports.KINDS`
EXPORTS = {"gcloud": "gcloud-command", "sdk": "sdk-code", "yaml": "gcloud-config"}


def _set_options(dropdown: Dropdown, options: list[tuple[str, Any]], value: Any) -> None:
    """Options first (ipywidgets then selects the first), then the value."""
    options = tuple((label, v) for label, v in options)
    if tuple(dropdown.options) != options:
        dropdown.options = options
    dropdown.value = value


def _masked(job: JobSpec) -> JobSpec:
    """The job with its env values *** (sensitive.mask_job), for what the widget shows and saves."""
    return job.copy(spec=type(job.spec).from_json(json.dumps(sensitive.mask_job(message_to_dict(job.spec)))))


class PoolCard(VBox):
    """One worker pool. It shows `pool_view` (from `widgets.pool_view`) and reports the
    user's edits to the callbacks given to `on_edit(callback(pos, field, value))`."""

    pool_view = Dict(help="what the card shows: values, options, disabled and hidden parts")

    def __init__(self, pos: int, **kwargs: Any) -> None:
        self.pos = pos
        self._edits = CallbackDispatcher()
        self._rendering = False
        self.heading = HTML()
        self.enabled = Checkbox(description="enabled", indent=False, layout=Layout(width="auto"))
        self.mode = ToggleButtons(options=MODES, style={"button_width": "140px"}) if pos == 2 else None
        self.replicas = IntText(description="Replicas", style=_STYLE, layout=Layout(width="200px"))
        self.machine = Dropdown(description="Machine type", style=_STYLE, layout=_WIDE)
        self.accelerator_type = Dropdown(description="Accelerator", style=_STYLE, layout=Layout(width="300px"))
        self.accelerator_count = Dropdown(description="x", style={"description_width": "14px"},
                                          layout=Layout(width="90px"))
        self.topology = Dropdown(description="TPU topology", style=_STYLE, layout=_WIDE)
        self.image = Text(description="Image", style=_STYLE, layout=_WIDE, continuous_update=False)
        self.disk_type = Dropdown(description="Boot disk", style=_STYLE, layout=Layout(width="300px"))
        self.disk_size = IntText(description="GB", style={"description_width": "24px"}, layout=Layout(width="120px"))
        self.suggestion = HTML()
        self.missing = HTML()  # why a machine or accelerator is not offered
        self.use_suggestion = Button(description="Use suggestion", icon="magic") if pos == 2 else None
        # rows made once: each refresh only picks which of them the card shows
        self.head_row = HBox(layout=Layout(align_items="center", justify_content="space-between"))
        self.accelerator_row = HBox([self.accelerator_type, self.accelerator_count])
        self.disk_row = HBox([self.disk_type, self.disk_size])
        fields = {"enabled": self.enabled, "mode": self.mode, "replica_count": self.replicas,
                  "machine_type": self.machine, "accelerator_type": self.accelerator_type,
                  "accelerator_count": self.accelerator_count, "tpu_topology": self.topology, "image": self.image,
                  "boot_disk_type": self.disk_type, "boot_disk_size_gb": self.disk_size}
        for field, control in fields.items():
            if control is not None:
                control.observe(partial(self._changed, field), names="value")
        if self.use_suggestion is not None:
            self.use_suggestion.on_click(lambda _button: self._edits(self.pos, "use_suggestion", True))
        kwargs.setdefault("layout", Layout(border="1px solid #dadce0", padding="4px 8px", margin="4px",
                                           width="470px"))
        super().__init__(**kwargs)

    def on_edit(self, callback: Callable[[int, str, Any], None], remove: bool = False) -> None:
        self._edits.register_callback(callback, remove=remove)

    def _changed(self, field: str, change: dict[str, Any]) -> None:
        if not self._rendering:
            self._edits(self.pos, field, change["new"])

    @observe("pool_view")
    def _refresh(self, _change: Any = None) -> None:
        v = self.pool_view
        self._rendering = True
        try:
            self.heading.value = f"<b>Pool {html.escape(v['title'])}</b>"
            self.enabled.value, self.enabled.disabled = v["enabled"], v["toggle_disabled"]
            if self.mode is not None:
                self.mode.value = v["mode"]
            self.replicas.value, self.replicas.disabled = v["replica_count"], v["replicas_disabled"]
            _set_options(self.machine, v["machine_options"], v["machine_type"])
            _set_options(self.accelerator_type, v["accelerator_type_options"], v["accelerator_type"])
            _set_options(self.accelerator_count, v["accelerator_count_options"], v["accelerator_count"])
            self.accelerator_type.disabled = v["accelerators_fixed"]
            self.accelerator_count.disabled = v["accelerators_fixed"] or not v["accelerator_type"]
            _set_options(self.topology, v["topology_options"], v["tpu_topology"])
            self.image.value, self.image.placeholder = v["image"], v["image_placeholder"]
            self.image.disabled = v["image_disabled"]
            _set_options(self.disk_type, v["boot_disk_type_options"], v["boot_disk_type"])
            self.disk_size.value = v["boot_disk_size_gb"]
            self.suggestion.value = _html.note(v["suggestion"]) if v["suggestion"] else ""
            self.missing.value = "".join(_html.note(line) for line in v["missing"])
        finally:
            self._rendering = False
        self.head_row.children = [self.heading, self.enabled] + (
            [self.mode] if self.mode is not None and v["enabled"] else [])
        rows: list[Any] = [self.head_row]
        if v["enabled"]:
            rows += [self.replicas, self.machine, self.accelerator_row]
            rows += [self.topology] if v["show_topology"] else []
            rows += [self.image, self.disk_row]
            rows += [self.missing] if v["missing"] else []
            if v["suggestion"] and self.use_suggestion is not None:
                rows += [self.suggestion, self.use_suggestion]
        self.children = rows


class AccessSection(VBox):
    """"Scheduling & access": strategy, waits, restarts, identity, network and its reserved IP ranges,
    web and dashboard access, TensorBoard, reservation, persistent resource. It shows `access_view`
    (the `view` trait) and reports the user's edits to the callbacks given to
    `on_edit(callback(field, value))`."""

    view = Dict(help="what the section shows (pool_view.access_view)")

    def __init__(self, **kwargs: Any) -> None:
        self._edits = CallbackDispatcher()
        self._rendering = False
        wide = Layout(width="470px")
        style = {"description_width": "130px"}  # room for "Reserved IP ranges", "Persistent resource"

        def text(description: str, placeholder: str) -> Text:
            return Text(description=description, placeholder=placeholder, style=style, layout=wide,
                        continuous_update=False)

        def check(description: str) -> Checkbox:
            return Checkbox(description=description, indent=False, layout=Layout(width="auto"))

        self.controls: dict[str, Any] = {
            "strategy": Dropdown(description="Strategy", style=style, layout=Layout(width="330px")),
            "max_wait": text("Max wait", "FLEX_START: e.g. 2h (0: wait for ever; default 1 day)"),
            "timeout": text("Timeout", "e.g. 90m (default: 7 days)"),
            "restart": check("restart the job when a worker fails"),
            "disable_retries": check("disable retries"),
            "service_account": text("Service account", "default: the project's Vertex AI service agent"),
            "network": text("Network", "projects/PROJECT_NUMBER/global/networks/NAME"),
            "reserved_ip_ranges": text("Reserved IP ranges", "names of the network's reserved ranges, comma-separated"),
            "web_access": check("interactive shell (web access)"),
            "dashboard_access": check("dashboard access"),
            "tensorboard": text("TensorBoard", "projects/P/locations/L/tensorboards/ID"),
            "reservation": text("Reservation", ""),
            "persistent_resource": text("Persistent resource", "ID: run on the machines of this persistent resource"),
        }
        for field, control in self.controls.items():
            control.observe(partial(self._changed, field), names="value")
        c = self.controls
        kwargs.setdefault("children", [
            HTML(_html.heading("Scheduling & access")),
            HBox([c["strategy"], c["restart"], c["disable_retries"]]), c["max_wait"], c["timeout"],
            c["service_account"], c["network"], c["reserved_ip_ranges"],
            HBox([c["web_access"], c["dashboard_access"]]), c["tensorboard"], c["reservation"],
            c["persistent_resource"]])
        super().__init__(**kwargs)

    def on_edit(self, callback: Callable[[str, Any], None], remove: bool = False) -> None:
        self._edits.register_callback(callback, remove=remove)

    def _changed(self, field: str, change: dict[str, Any]) -> None:
        if not self._rendering:
            self._edits(field, change["new"])

    @observe("view")
    def _refresh(self, _change: Any = None) -> None:
        v = self.view
        self._rendering = True
        try:
            _set_options(self.controls["strategy"], v["strategy_options"], v["values"]["strategy"])
            for field, control in self.controls.items():
                if field != "strategy":
                    control.value = v["values"][field]
            self.controls["reservation"].placeholder = v["reservation_placeholder"]
        finally:
            self._rendering = False


class PoolConfigurator(_html.StaticRepr, VBox):
    """Four pool cards (primary, workers, parameter servers or Reduction Server,
    evaluators) and, live below them, what the core says about the job they make.

    `.spec` is the current `JobSpec`; assign a JobSpec or anything `JobSpec.load`
    accepts to load it into the cards.
    """

    display_name = Unicode(layout_state.DEFAULT_NAME, help="the job's display name")
    region = Unicode(catalog.DEFAULT_REGION, help="Vertex AI region: what the pickers offer, the rules, the cost, "
                     "the exports, the Reduction Server image")
    image = Unicode(help="the primary's image; other pools use it when left empty (default: the workbench's "
                         "default base image)")
    pools = List(Dict(), help="the four pools' UI state, positions 0..3 (see widgets.layout_state)")
    access = Dict(help="the scheduling and access flags' values (see widgets.layout_state.ACCESS_FIELDS)")
    export_kind = Enum(("", *EXPORTS), "", help="the export shown in the output area: gcloud, sdk, yaml, or empty")
    show_env_values = Bool(False, help="exports show (and export() returns) the job's env values; off: NAME=***")
    job = Instance(JobSpec, allow_none=True, read_only=True,
                   help="the job the cards describe (None when the core cannot parse it); observe it to follow")

    def __init__(self, spec: Any = None, **kwargs: Any) -> None:
        self._ready = self._batch = self._rendering = False
        self._extra: dict[str, Any] = {}
        self._problems: list[str] = []
        self._json = ""
        self._estimate: cost.Estimate | None = None
        self.name_text = Text(description="Display name", style=_STYLE, layout=Layout(width="360px"),
                              continuous_update=False)
        self.region_picker = Dropdown(description="Region", style={"description_width": "50px"},
                                      layout=Layout(width="240px"))
        self.name_text.observe(partial(self._control_changed, "display_name"), names="value")
        self.region_picker.observe(partial(self._control_changed, "region"), names="value")
        self.cards = tuple(PoolCard(pos) for pos in range(4))
        for card in self.cards:
            card.on_edit(self._on_edit)
        self.access_section = AccessSection()
        self.access_section.on_edit(self._on_access_edit)
        self.problems_html, self.preview, self.table, self.export_output = HTML(), HTML(), HTML(), HTML()
        self.notices_html, self.cost_html = HTML(), HTML()
        self.export_buttons = {kind: Button(description=exports.KINDS[core].label) for kind, core in EXPORTS.items()}
        for kind, button in self.export_buttons.items():
            button.on_click(lambda _button, kind=kind: self.export(kind))
        self.show_env_checkbox = Checkbox(description="Show env values", indent=False, layout=Layout(width="auto"))
        self.show_env_checkbox.observe(partial(self._control_changed, "show_env_values"), names="value")
        super().__init__(**kwargs)
        if spec is not None:
            self.spec = spec
            if "display_name" in kwargs:
                self.display_name = kwargs["display_name"]
        self.children = [
            HBox([self.name_text, self.region_picker]),
            Box(list(self.cards), layout=Layout(display="flex", flex_flow="row wrap")),
            self.access_section,
            HTML(_html.heading("Validation")), self.problems_html, self.notices_html,
            HTML(_html.heading("Cost per hour")), self.cost_html,
            HTML(_html.heading("worker_pool_specs")), self.preview,
            HTML(_html.heading("Replicas")), self.table,
            HBox([HTML(_html.heading("Export")), *self.export_buttons.values(), self.show_env_checkbox]),
            self.export_output,
        ]
        self._ready = True
        self._refresh()

    @default("image")
    def _default_image(self) -> str:
        return packaging.resolve_base_image()

    @default("pools")
    def _default_pools(self) -> list[dict[str, Any]]:
        return layout_state.default_state()["pools"]

    @default("access")
    def _default_access(self) -> dict[str, Any]:
        return layout_state.default_access()

    # ---- state ------------------------------------------------------------
    @property
    def state(self) -> dict[str, Any]:
        """The UI state as a plain dict (a copy; assign it back to change the widget)."""
        return copy.deepcopy({"display_name": self.display_name, "region": self.region, "image": self.image,
                              "pools": self.pools, "access": self.access, "extra": self._extra})

    @state.setter
    def state(self, state: dict[str, Any]) -> None:
        self._batch = True
        try:
            self._extra = state.get("extra") or {}
            self.display_name, self.region, self.image = state["display_name"], state["region"], state["image"]
            self.pools, self.access = state["pools"], state["access"]
        finally:
            self._batch = False
        self._refresh()

    @property
    def spec(self) -> JobSpec:
        """The job the cards describe (a new JobSpec each time)."""
        return layout_state.build_job(self.state)

    @spec.setter
    def spec(self, source: Any) -> None:
        """A job in any format; one without a display name keeps the configurator's (a file's: its name)."""
        job = JobSpec.load(source)
        if job.source_dir is None:  # not a file
            job = JobSpec.load(source, self.display_name)
        self.state = layout_state.state_from_job(job, self.region)

    @property
    def problems(self) -> list[str]:
        """validate.problems of the current job, one line each."""
        return list(self._problems)

    @property
    def valid(self) -> bool:
        return not self._problems

    @property
    def notices(self) -> list[str]:
        """validate.notices of the current job in the region, one line each."""
        return layout_state.notices(self.state, self.job)

    @property
    def cost(self) -> cost.Estimate | None:
        """What the current job costs per hour in the region (an estimate; None when it cannot be read)."""
        return self._estimate

    @property
    def preview_json(self) -> str:
        """The JSON shown: the SDK's `worker_pool_specs` of `.spec`, env values masked (NAME: ***)."""
        return self._json

    # ---- actions ------------------------------------------------------------
    def export(self, kind: str) -> str:
        """Show and return the gcloud command ("gcloud"), SDK snippet ("sdk") or config.yaml ("yaml"):
        the job's env values are *** unless `show_env_values` (the "Show env values" box) is on."""
        self.export_kind = kind
        return self._export_text(kind)

    def _export_text(self, kind: str) -> str:
        job = self.job
        if job is None:
            return ""
        return exports.export(job if self.show_env_values else _masked(job), EXPORTS[kind], self.region)

    def use_suggestion(self) -> None:
        """Make pool 2 a Reduction Server sized to the workers' bandwidth."""
        self.state = layout_state.apply_reducer_suggestion(self.state)

    def _on_edit(self, pos: int, field: str, value: Any) -> None:
        if field == "use_suggestion":
            self.use_suggestion()
        else:
            self.state = layout_state.update_pool(self.state, pos, field, value)

    def _on_access_edit(self, field: str, value: Any) -> None:
        self.state = layout_state.update_access(self.state, field, value)

    def _control_changed(self, trait: str, change: dict[str, Any]) -> None:
        """The user's edit of the name, the region or "Show env values". What `_refresh` sets is not
        one: a dropdown given new options first selects the first of them."""
        if not self._rendering:
            setattr(self, trait, change["new"])

    # ---- view ---------------------------------------------------------------
    @observe("display_name", "region", "image", "pools", "access", "export_kind", "show_env_values")
    def _changed(self, _change: Any) -> None:
        if self._ready and not self._batch:
            self._refresh()

    def _refresh(self) -> None:
        state = self.state
        job, self._problems = layout_state.problems(state)
        self.set_trait("job", job)
        for card in self.cards:
            card.pool_view = pool_view(state, card.pos)
        self.access_section.view = access_view(state)
        regions = catalog.training_regions()
        self._rendering = True
        try:
            self.name_text.value = self.display_name
            # a region that is not a training region stays as set: validation names it
            _set_options(self.region_picker, [(r, r) for r in regions] + ([] if self.region in regions
                                                                          else [(self.region, self.region)]),
                         self.region)
            self.show_env_checkbox.value = self.show_env_values
        finally:
            self._rendering = False
        self.problems_html.value = _html.problem_list(self._problems)
        self.notices_html.value = "".join(_html.note(f"note: {line}") for line in layout_state.notices(state, job))
        self._estimate = layout_state.estimate(state, job, valid=not self._problems)
        titles = {card.pos: card.pool_view["title"] for card in self.cards}
        self.cost_html.value = _html.cost(self._estimate, titles) if self._estimate else ""
        # saved with the notebook: env values masked (the spec itself keeps them)
        self._json = json.dumps(sensitive.mask_job(job.to_dict("sdk")["worker_pool_specs"]), indent=2) if job else ""
        self.preview.value = _html.pre(self._json, max_height="360px")
        try:
            self.table.value = _html.frame(tables.replica_frame(job)) if job else ""
        except Exception as exc:  # a job without a primary has no replicas to list
            self.table.value = _html.note(f"no replicas: {exc}", _html.RED)
        text = self._export_text(self.export_kind) if self.export_kind else ""
        self.export_output.value = _html.pre(text) if text else ""

    def to_html(self) -> str:
        export = (_html.heading(exports.KINDS[EXPORTS[self.export_kind]].label) + self.export_output.value
                  if self.export_output.value else "")
        return (f'<div class="vtrain-pools">{_html.heading(f"Worker pools of {self.display_name} ({self.region})")}'
                f"{self.problems_html.value}{self.notices_html.value}"
                f"{_html.heading('Cost per hour')}{self.cost_html.value}"
                f"{_html.heading('worker_pool_specs')}{self.preview.value}"
                f"{_html.heading('Replicas')}{self.table.value}{export}</div>")

    def to_text(self) -> str:
        job = self.job
        lines = [f"{self.display_name} ({self.region})"]
        if job is not None:
            for pos, pool in job.pools:
                ms = pool.machine_spec
                role = "Reduction Server" if is_reduction_server_pool(pos, pool) else POOL_ROLES[pos]
                lines.append(f"  pool {pos} {role}: {pool.replica_count} x "
                             f"{ms.machine_type}, accelerators {tables.accelerators_text(ms)}")
        if self._estimate is not None:
            lines.append(f"cost: {self._estimate.summary()}")
        lines += ["valid"] if self.valid else [f"problem: {p}" for p in self._problems]
        return "\n".join(lines)
