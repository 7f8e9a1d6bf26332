"""PoolConfigurator: pickers offer only what the catalog offers, and everything shown
comes from the core (validate, spec, cluster). Widgets build without a kernel."""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

import comm
from conftest import pool
from jupyter_ext import catalog, cluster, cost, exports, packaging, sensitive, validate
from jupyter_ext.spec import JobSpec
from widgets import PoolConfigurator, _html, vertex_pools
from widgets.tables import replica_frame

SPECS = Path(__file__).parent / "data" / "specs"
IMAGE = "us-docker.pkg.dev/proj/repo/trainer:1"


def values(dropdown):
    return [value for _label, value in dropdown.options]


def choose(card, **fields):
    """Set controls as a user would, in order (each change goes through the widget's events)."""
    for name, value in fields.items():
        getattr(card, name).value = value


def four_pools():
    trainer = {"image": IMAGE, "args": ["--epochs", "3"], "env": {"MODE": "x"}}  # what pools 0-2 run
    # replica counts as strings, the way REST bodies carry int64 values
    return {
        "displayName": "four-pools",
        "labels": {"team": "vision"},
        "jobSpec": {
            "workerPoolSpecs": [
                pool("1", machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=1, **trainer),
                pool("3", machine="n1-standard-16", accelerator="NVIDIA_TESLA_V100", accelerator_count=2,
                     diskSpec={"bootDiskType": "pd-standard", "bootDiskSizeGb": 200}, **trainer),
                pool("2", machine="n1-highmem-8", **trainer),
                pool("1", image="gcr.io/p/evaluator:2"),
            ],
            "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/out"},
            "scheduling": {"timeout": "7200s", "restartJobOnWorkerRestart": True},
        },
    }


def test_defaults_are_the_codelab_layout():
    w = vertex_pools()
    job = w.spec
    assert [(pos, p.machine_spec.machine_type, p.replica_count) for pos, p in job.pools] == [
        (0, "n1-standard-4", 1), (1, "n1-standard-4", 1)]
    assert [c.enabled.value for c in w.cards] == [True, True, False, False]
    assert w.cards[0].enabled.disabled and w.cards[0].replicas.disabled  # the primary is always one replica
    assert w.region == "us-central1"
    assert w.image == packaging.resolve_base_image()  # the workbench's default base image
    assert w.valid and w.problems == [] and "valid" in w.problems_html.value


def test_machine_labels_are_grouped_by_family():
    w = PoolConfigurator()
    labels = dict((v, label) for label, v in w.cards[0].machine.options)
    assert labels["n1-standard-8"] == "n1-standard-8 — 8 vCPU, 30 GB"
    families = [catalog.machine(v).family for v in values(w.cards[0].machine)]
    assert families == sorted(families, key=list(catalog.families()).index)
    assert not any(catalog.machine(v).kind == "tpu" for v in values(w.cards[1].machine))  # TPUs: primary only


def test_n1_standard_8_offers_only_valid_accelerators():
    w = PoolConfigurator()
    card = w.cards[0]
    choose(card, machine="n1-standard-8")
    # the P100 is past its end of support: not offered, and the card says why
    assert set(values(card.accelerator_type)) == {"", "NVIDIA_TESLA_T4", "NVIDIA_TESLA_V100", "NVIDIA_TESLA_P4"}
    assert "NVIDIA P100 is not offered: past end of support (2026-09-15)" in card.missing.value
    assert dict(card.accelerator_type.options)["None"] == ""
    choose(card, accelerator_type="NVIDIA_TESLA_V100")
    assert values(card.accelerator_count) == [1, 2, 4, 8]
    choose(card, accelerator_type="NVIDIA_TESLA_T4")
    assert values(card.accelerator_count) == [1, 2, 4]
    assert not card.accelerator_count.disabled


def test_switching_machine_narrows_the_counts():
    w = PoolConfigurator()
    card = w.cards[0]
    choose(card, machine="n1-standard-8", accelerator_type="NVIDIA_TESLA_V100", accelerator_count=1)
    choose(card, machine="n1-standard-32")
    assert values(card.accelerator_count) == [4, 8]
    assert card.accelerator_count.value == 4
    assert w.valid, w.problems


def test_cpu_only_machine_offers_none():
    w = PoolConfigurator()
    card = w.cards[1]
    choose(card, machine="n1-standard-8", accelerator_type="NVIDIA_TESLA_T4")
    choose(card, machine="e2-standard-8")
    assert card.accelerator_type.options == (("None", ""),)
    assert card.accelerator_count.disabled
    assert "acceleratorType" not in json.dumps(w.spec.to_dict("rest")["jobSpec"]["workerPoolSpecs"][1])


def test_fixed_gpu_machine_fixes_type_and_count():
    w = PoolConfigurator()
    card = w.cards[1]
    choose(card, machine="a2-highgpu-2g")
    assert card.accelerator_type.value == "NVIDIA_TESLA_A100" and card.accelerator_count.value == 2
    assert card.accelerator_type.disabled and card.accelerator_count.disabled
    pools = json.loads(w.preview_json)
    assert pools[1]["machine_spec"] == {"machine_type": "a2-highgpu-2g", "accelerator_type": "NVIDIA_TESLA_A100",
                                        "accelerator_count": 2}
    assert "NVIDIA_TESLA_A100" in w.preview.value
    assert w.valid


def test_invalid_state_shows_the_core_message():
    w = PoolConfigurator()
    state = w.state
    state["pools"][0]["replica_count"] = 2
    w.state = state
    expected = validate.problems(w.spec)
    assert expected and expected[0].startswith("workerPoolSpecs[0].replicaCount")
    assert w.problems == expected and not w.valid
    assert "workerPoolSpecs[0].replicaCount: the primary pool runs exactly 1 replica, not 2" in w.problems_html.value
    assert "valid</div>" not in w.problems_html.value
    assert w.cards[0].replicas.value == 2  # shown as loaded, not silently fixed


def test_a_loaded_count_the_catalog_does_not_offer_is_shown_and_reported():
    w = PoolConfigurator(spec={"workerPoolSpecs": [
        pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_V100", accelerator_count=3, image=IMAGE)]})
    card = w.cards[0]
    assert card.accelerator_count.value == 3 and values(card.accelerator_count) == [1, 2, 4, 8, 3]
    assert w.problems == validate.problems(w.spec)
    assert any("acceleratorCount: 3 is not offered for NVIDIA_TESLA_V100 on n1-standard-8" in p for p in w.problems)
    assert "acceleratorCount: 3 is not offered" in w.to_html()


def test_json_preview_is_the_sdk_worker_pool_specs_with_env_values_masked():
    w = PoolConfigurator(spec=four_pools())
    masked = sensitive.mask_job(w.spec.to_dict("sdk")["worker_pool_specs"])
    assert w.preview_json == json.dumps(masked, indent=2)
    choose(w.cards[1], replicas=5)
    assert json.loads(w.preview_json)[1]["replica_count"] == 5
    # the notebook keeps what the preview shows: the job's env values are not in it, the spec keeps them
    assert json.loads(w.preview_json)[0]["container_spec"]["env"] == [{"name": "MODE", "value": "***"}]
    assert "MODE" in w.preview.value and '"x"' not in w.preview.value
    assert w.spec.to_dict("sdk")["worker_pool_specs"][0]["container_spec"]["env"] == [{"name": "MODE", "value": "x"}]


def test_replica_table_comes_from_the_cluster():
    w = PoolConfigurator(spec=four_pools())
    table = replica_frame(w.spec)
    assert list(table["task name"]) == ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2",
                                        "workerpool2-0", "workerpool2-1", "workerpool3-0"]
    assert list(table["role"][:2]) == ["primary", "worker"]
    assert table["accelerators"][1] == "2 x NVIDIA V100"
    assert "workerpool3-0" in w.table.value


@pytest.fixture
def memory_cap():
    """The test may grow the process by 1 GiB at most (RLIMIT_AS): past that an allocation raises
    MemoryError, where it would otherwise take the machine's memory."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    status = Path("/proc/self/status").read_text()
    size = next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + 2**30 if hard == resource.RLIM_INFINITY
                                            else min(size + 2**30, hard), hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_a_huge_replica_count_is_counted_not_listed(memory_cap):
    w = vertex_pools()
    choose(w.cards[1], replicas=10**12)  # typed by a user: the kernel stays up and responsive
    more = "… 999,999,999,990 more replicas not listed (to workerpool1-999999999999)"
    table = replica_frame(w.spec)
    assert list(table["task name"]) == ["workerpool0-0", *(f"workerpool1-{i}" for i in range(10)), more]
    assert list(table["role"])[-1] == "worker" and more in w.table.value
    assert w.valid and w.cost.pools[1].replicas == 10**12
    assert w.cost.on_demand == pytest.approx(cost.estimate(w.spec, w.region).pools[0].on_demand * (10**12 + 1))
    assert "  pool 1 workers: 1000000000000 x n1-standard-4, accelerators -" in w.to_text().splitlines()
    assert "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1000000000000," in w.export("gcloud")
    loaded = vertex_pools(spec=w.spec.dump("rest"))  # a job file with that many
    assert loaded.table.value == w.table.value
    choose(w.cards[1], replicas=11)  # one more than listed: one line says so
    assert list(replica_frame(w.spec)["task name"])[-2:] == [
        "workerpool1-9", "… 1 more replica not listed (to workerpool1-10)"]


def test_images_default_to_the_primary():
    w = PoolConfigurator()
    w.cards[0].image.value = "gcr.io/p/trainer:2"
    assert w.image == "gcr.io/p/trainer:2"
    assert [p.container_spec.image_uri for _, p in w.spec.pools] == ["gcr.io/p/trainer:2"] * 2
    assert w.cards[1].image.placeholder == "gcr.io/p/trainer:2"
    w.cards[1].image.value = "gcr.io/p/worker:1"
    assert [p.container_spec.image_uri for _, p in w.spec.pools] == ["gcr.io/p/trainer:2", "gcr.io/p/worker:1"]


def test_boot_disk():
    w = PoolConfigurator()
    assert values(w.cards[0].disk_type) == list(validate.BOOT_DISK_TYPES)
    choose(w.cards[0], disk_type="hyperdisk-balanced", disk_size=500)
    disk = w.spec.spec.worker_pool_specs[0].disk_spec
    assert (disk.boot_disk_type, disk.boot_disk_size_gb) == ("hyperdisk-balanced", 500)
    choose(w.cards[0], disk_size=50)
    assert any("bootDiskSizeGb: 50 is out of range" in p for p in w.problems)


def reduction_server_layout():
    w = PoolConfigurator()
    v100 = {"machine": "n1-highmem-96", "accelerator_type": "NVIDIA_TESLA_V100", "accelerator_count": 8}
    choose(w.cards[0], **v100)
    choose(w.cards[1], **v100, replicas=4)
    return w


def test_reduction_server_suggestion():
    w = reduction_server_layout()
    card = w.cards[2]
    card.mode.value = "reduction_server"
    assert card.enabled.value and card.image.disabled
    text = card.suggestion.value
    assert "500 Gbps" in text and "32 Gbps" in text and "16 reducers" in text
    assert card.use_suggestion in [c for row in card.children for c in getattr(row, "children", [row])]
    card.use_suggestion.click()
    pool = w.spec.spec.worker_pool_specs[2]
    assert (pool.replica_count, pool.machine_spec.machine_type) == (16, "n1-highcpu-16")
    assert not pool.machine_spec.accelerator_count
    assert pool.container_spec.image_uri == catalog.reduction_server_image("us-central1")
    assert w.valid, w.problems
    assert [r.role for r in cluster.replicas(w.spec)][-1] == "reduction_server"


def test_reduction_server_arithmetic_is_the_catalogs():
    w = reduction_server_layout()
    w.cards[2].mode.value = "reduction_server"
    count, text = catalog.reducer_suggestion(w.spec)
    assert count == 16 and w.cards[2].suggestion.value == _html.note(text)


def test_reduction_server_image_follows_the_region():
    w = reduction_server_layout()
    w.cards[2].mode.value = "reduction_server"
    w.region_picker.value = "europe-west4"
    assert w.spec.spec.worker_pool_specs[2].container_spec.image_uri == catalog.reduction_server_image("europe-west4")
    w.cards[2].mode.value = "parameter_server"
    assert w.spec.spec.worker_pool_specs[2].container_spec.image_uri == w.image


def test_tpu_machine_switches_to_one_pool():
    w = PoolConfigurator()
    w.cards[3].enabled.value = True
    choose(w.cards[0], machine="ct5lp-hightpu-4t")
    assert len(w.spec.pools) == 1
    assert [c.enabled.value for c in w.cards] == [True, False, False, False]
    assert all(c.enabled.disabled for c in w.cards[1:])
    topologies = list(catalog.machine("ct5lp-hightpu-4t").tpu_topologies)
    assert values(w.cards[0].topology) == topologies
    assert w.cards[0].topology in w.cards[0].children
    choose(w.cards[0], topology="4x4")
    assert w.spec.spec.worker_pool_specs[0].machine_spec.tpu_topology == "4x4"
    assert w.valid, w.problems


def test_cloud_tpu_offers_its_tpu_accelerators():
    w = PoolConfigurator()
    choose(w.cards[0], machine="cloud-tpu")
    assert values(w.cards[0].accelerator_type) == list(catalog.valid_accelerators("cloud-tpu"))
    assert values(w.cards[0].accelerator_count) == list(catalog.valid_accelerators("cloud-tpu")["TPU_V2"])
    assert w.valid, w.problems


def test_spec_round_trip_of_a_four_pool_custom_job():
    body = four_pools()
    w = PoolConfigurator()
    w.spec = body
    assert w.spec == JobSpec.load(body)
    assert w.display_name == "four-pools"
    assert [c.enabled.value for c in w.cards] == [True, True, True, True]
    assert w.cards[1].disk_type.value == "pd-standard" and w.cards[1].disk_size.value == 200
    assert w.cards[3].image.value == "gcr.io/p/evaluator:2"
    assert w.cards[1].image.value == ""  # same as the primary's


@pytest.mark.parametrize("region,accelerator", [("us-central1", "TPU_V3"), ("asia-east1", "TPU_V2")])
def test_tpu_pod_slices_are_offered_only_where_the_region_offers_them(region, accelerator):
    w = PoolConfigurator(region=region)
    card = w.cards[0]
    choose(card, machine="cloud-tpu", accelerator_type=accelerator)
    assert values(card.accelerator_count) == [8]  # a single host: the only size offered there
    assert w.valid, w.problems
    largest = catalog.valid_accelerators("cloud-tpu")[accelerator][-1]
    assert (f"{catalog.accelerator_label(accelerator)} Pod slices (32 … {largest} cores; only a single host is "
            "offered)") in card.missing.value
    w.region_picker.value = "europe-west4"  # Pod slices are offered there
    assert values(card.accelerator_count) == list(catalog.valid_accelerators("cloud-tpu")[accelerator])
    assert "Pod slices" not in card.missing.value
    choose(card, accelerator_count=32)
    w.region_picker.value = region  # a chosen Pod slice stays shown, and validation refuses it
    assert values(card.accelerator_count) == [8, 32] and card.accelerator_count.value == 32
    assert w.problems == validate.problems(w.spec, region) and "Pod slice (32 cores)" in w.problems[0]


@pytest.mark.parametrize("name", sorted(p.name for p in SPECS.iterdir()))
def test_spec_round_trip_of_every_format(name):
    job = JobSpec.load(SPECS / name)
    assert PoolConfigurator(spec=SPECS / name).spec == job


def test_export_buttons_show_the_cores_exports():
    w = PoolConfigurator(spec=four_pools(), region="europe-west4")
    labels = {kind: button.description for kind, button in w.export_buttons.items()}
    assert labels == {"gcloud": "gcloud command", "sdk": "Python SDK", "yaml": "config.yaml"}
    masked = JobSpec.load(sensitive.mask_job(w.spec.to_dict("rest")))  # what is shown by default
    for kind, core in (("gcloud", "gcloud-command"), ("sdk", "sdk-code"), ("yaml", "gcloud-config")):
        w.export_buttons[kind].click()
        text = exports.export(masked, core, "europe-west4")
        assert w.export_kind == kind and w.export(kind) == text
        assert w.export_output.value == _html.pre(text)
        assert _html.heading(labels[kind]) in w.to_html()
        w.show_env_checkbox.value = True
        assert w.export(kind) == exports.export(w.spec, core, "europe-west4")
        w.show_env_checkbox.value = False


def widget_html(widget):
    """Every string the widget and its descendants hold in their synced state (what a saved notebook keeps)."""
    state = json.dumps(widget.get_state(), default=str)
    children = getattr(widget, "children", ())
    return state + "".join(widget_html(child) for child in children)


def test_env_values_are_masked_in_every_export_until_the_user_asks():
    secret = "supersecret123"
    w = PoolConfigurator(spec={"workerPoolSpecs": [pool(image=IMAGE, env={"API_TOKEN": secret}), pool(image=IMAGE)]})
    shown = []
    for kind, button in w.export_buttons.items():
        button.click()
        shown += [w.export(kind), w.export_output.value, w.to_html(), w.to_text(), widget_html(w)]
    assert all("API_TOKEN" in w.export(kind) for kind in ("sdk", "yaml"))  # the variable is named, not its value
    assert shown and not any(secret in text for text in shown)
    assert "'***'" in w.export("sdk") and "value: '***'" in w.export("yaml")
    bundle = w._repr_mimebundle_()
    assert secret not in bundle["text/html"] and secret not in bundle["text/plain"]

    assert w.show_env_checkbox in w.children[-2].children  # in the export row
    w.show_env_checkbox.value = True
    assert secret in w.export_output.value and secret in w.to_html() and secret in w.export("yaml")
    w.show_env_checkbox.value = False
    assert secret not in w.export_output.value and secret not in w.export("sdk")


def test_exports_follow_changes():
    w = PoolConfigurator()
    w.export_buttons["yaml"].click()
    choose(w.cards[1], replicas=3)
    assert "replicaCount: 3" in w.export_output.value


def test_static_output_for_nbconvert():
    w = PoolConfigurator()
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "worker_pool_specs" in bundle["text/html"] and "workerpool1-0" in bundle["text/html"]
    assert bundle["text/html"] == w.to_html()
    assert bundle["text/plain"].splitlines()[-1] == "valid"


def test_spec_keyword_and_display_name():
    w = vertex_pools(spec=SPECS / "rest_custom_job.json", display_name="renamed")
    assert w.display_name == "renamed" and w.spec.display_name == "renamed"
    w.name_text.value = "again"
    assert w.spec.display_name == "again"
    assert vertex_pools(SPECS / "rest_custom_job.json").spec == PoolConfigurator(SPECS / "rest_custom_job.json").spec


def test_the_text_form_names_a_reduction_server_pool():
    w = reduction_server_layout()
    w.use_suggestion()
    assert "  pool 2 Reduction Server: 16 x n1-highcpu-16, accelerators -" in w.to_text().splitlines()
    w.cards[2].mode.value = "parameter_server"
    assert "  pool 2 parameter servers: 16 x n1-highcpu-16, accelerators -" in w.to_text().splitlines()


def test_a_region_set_in_code_that_is_not_a_training_region_is_kept_and_named():
    w = vertex_pools()
    w.region = "nowhere-1"
    assert w.region == "nowhere-1" and w.region_picker.value == "nowhere-1"
    assert w.problems == vertex_pools(region="nowhere-1").problems  # as the constructor says it
    assert len(w.problems) == 1 and w.problems[0].startswith("region: ") and "'nowhere-1'" in w.problems[0]
    w.region_picker.value = "europe-west4"  # the user picks a real one: the unknown one is no longer offered
    assert w.region == "europe-west4" and w.valid and values(w.region_picker) == catalog.training_regions()


@pytest.fixture
def sent(monkeypatch):
    """The state updates widgets send to the front end, as (comm id, state), in order.

    With no kernel `comm.create_comm` gives a DummyComm; this one records what is sent."""
    messages = []

    class RecordingComm(comm.DummyComm):
        def send(self, data=None, metadata=None, buffers=None):
            if data and data.get("method") == "update":
                messages.append((self.comm_id, data["state"]))

    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    return messages


def test_children_assigned_whole(sent):
    w = PoolConfigurator()
    card = w.cards[2]
    assert len(card.children) == 1  # a disabled pool shows its header only
    sent.clear()
    card.enabled.value = True  # one user edit
    updates = [state["children"] for comm_id, state in sent if comm_id == card.model_id and "children" in state]
    assert len(card.children) > 1
    assert updates == [[f"IPY_MODEL_{c.model_id}" for c in card.children]]  # one update, all rows at once
    assert not any(comm_id == w.model_id for comm_id, _ in sent)  # the configurator's own layout stays


# ---- the region picker drives what is offered; scheduling & access (issue 16) ----------------------------

def test_a_region_without_h100_does_not_offer_it_and_says_why():
    w = PoolConfigurator()
    assert "a3-highgpu-8g" in values(w.cards[0].machine)
    assert values(w.region_picker) == catalog.training_regions()
    w.region_picker.value = "us-west2"
    card = w.cards[0]
    assert not any(catalog.machine(m).fixed_accelerator == ("NVIDIA_H100_80GB", 8) for m in values(card.machine))
    assert not any(v.startswith(("a3-highgpu", "a2-", "g2-")) for v in values(card.machine))
    assert "Not offered for training in us-west2: " in card.missing.value
    assert "NVIDIA H100 80GB (a3-highgpu-1g … a3-highgpu-8g)" in card.missing.value
    assert card.missing in card.children
    choose(card, machine="n1-standard-8")
    assert set(values(card.accelerator_type)) == {"", "NVIDIA_TESLA_T4", "NVIDIA_TESLA_P4"}  # no V100 there


def test_a_loaded_h100_job_in_that_region_is_shown_and_refused():
    w = PoolConfigurator(spec={"workerPoolSpecs": [pool(machine="a3-highgpu-8g", accelerator="NVIDIA_H100_80GB",
                                                        accelerator_count=8)]}, region="us-west2")
    assert w.cards[0].machine.value == "a3-highgpu-8g"  # kept visible, so validation can name it
    assert w.problems == validate.problems(w.spec, "us-west2") and len(w.problems) == 1
    assert "NVIDIA_H100_80GB) is not offered for Vertex AI training in us-west2" in w.problems[0]
    w.region_picker.value = "us-central1"
    assert w.valid


def test_notices_are_shown_but_do_not_invalidate():
    w = PoolConfigurator()
    w.region_picker.value = "europe-west8"  # no region data there
    choose(w.cards[0], machine="a3-ultragpu-8g")
    assert w.valid and w.notices == validate.notices(w.spec, "europe-west8")
    assert "does not cover NVIDIA_H200_141GB in europe-west8" in w.notices_html.value


def test_scheduling_and_access_section_sets_the_fields():
    w = PoolConfigurator()
    section = w.access_section
    assert section in w.children
    assert [label for label, _ in section.controls["strategy"].options] == [
        "default (STANDARD)", "STANDARD", "SPOT", "FLEX_START"]
    edits = {"strategy": "SPOT", "timeout": "90m", "restart": True, "service_account": "sa@p.iam.gserviceaccount.com",
             "network": "projects/1/global/networks/vpc", "reserved_ip_ranges": "range-a, range-b",
             "web_access": True, "dashboard_access": True,
             "tensorboard": "projects/p/locations/us-central1/tensorboards/1", "reservation": "ANY",
             "persistent_resource": "pr-1"}
    for field, value in edits.items():
        section.controls[field].value = value
    spec = w.spec.spec
    assert (spec.scheduling.strategy.name, spec.scheduling.timeout.total_seconds()) == ("SPOT", 5400)
    assert spec.scheduling.restart_job_on_worker_restart and spec.enable_web_access and spec.enable_dashboard_access
    assert (spec.service_account, spec.network, spec.tensorboard) == (
        edits["service_account"], edits["network"], edits["tensorboard"])
    assert all(p.machine_spec.reservation_affinity.reservation_affinity_type.name == "ANY_RESERVATION"
               for _, p in w.spec.pools)
    assert w.valid, w.problems
    assert f"${cost.estimate(w.spec, 'us-central1').spot:.4f}/h Spot" in w.cost_html.value
    assert "scheduling_strategy=Scheduling.Strategy.SPOT" in w.export("sdk")
    body = json.loads(exports.export(w.spec, "rest", w.region))["jobSpec"]
    assert (body["reservedIpRanges"], body["persistentResourceId"]) == (["range-a", "range-b"], "pr-1")
    assert "persistent_resource_id='pr-1'" in w.export("sdk")
    section.controls["reserved_ip_ranges"].value = ""  # emptied: the job has none
    assert "reservedIpRanges" not in json.loads(exports.export(w.spec, "rest", w.region))["jobSpec"]


def test_a_spot_job_leads_with_the_spot_price_as_vtrain_cost_does():
    w = PoolConfigurator()
    w.access_section.controls["strategy"].value = "SPOT"
    estimate = cost.estimate(w.spec, "us-central1")
    assert w.cost.text() == estimate.text(cost.spot_by_default(w.spec))  # what vtrain cost and the dry run print
    assert w.cost.text().startswith("Cost of vertex-training-job in us-central1, USD per hour, Spot prices")
    spot_first = f"{cost.money(estimate.spot)}/h Spot, {cost.money(estimate.on_demand)}/h on demand"
    assert w.cost.summary().startswith(spot_first) and f">{spot_first}" in w.cost_html.value
    assert f"cost: {spot_first}" in w.to_text()
    w.access_section.controls["strategy"].value = "STANDARD"
    assert w.cost.summary().startswith(f"{cost.money(estimate.on_demand)}/h on demand, ")


def test_a_bad_duration_is_one_line_naming_the_flag():
    w = PoolConfigurator()
    w.access_section.controls["max_wait"].value = "2 hours"
    assert w.problems == ["--max-wait (scheduling.maxWaitDuration): not a duration: '2 hours' (e.g. 30m, 2h, 1h30m, "
                          "3600s)"]


def test_flex_start_in_the_configurator_follows_the_rules():
    w = PoolConfigurator()
    w.access_section.controls["strategy"].value = "FLEX_START"
    assert any("FLEX_START (scheduling.strategy) takes" in p for p in w.problems)
    for card in w.cards[:2]:
        choose(card, machine="a2-highgpu-1g")
    w.access_section.controls["max_wait"].value = "4h"
    assert w.valid, w.problems
    assert w.spec.spec.scheduling.max_wait_duration.total_seconds() == 4 * 3600


def test_a_job_with_scheduling_and_access_round_trips_through_the_configurator():
    body = four_pools()
    body["jobSpec"].update(serviceAccount="sa@p.iam.gserviceaccount.com", enableDashboardAccess=True,
                           reservedIpRanges=["r-a"], network="projects/1/global/networks/vpc",
                           persistentResourceId="pr")
    body["jobSpec"]["scheduling"].update(strategy="SPOT", disableRetries=True)
    w = PoolConfigurator(spec=body)
    assert w.spec == JobSpec.load(body)
    controls = w.access_section.controls
    assert (controls["strategy"].value, controls["timeout"].value, controls["restart"].value,
            controls["disable_retries"].value, controls["dashboard_access"].value) == ("SPOT", "2h", True, True, True)
    assert (controls["reserved_ip_ranges"].value, controls["persistent_resource"].value) == ("r-a", "pr")
    controls["strategy"].value = ""
    assert "strategy" not in w.spec.to_dict("rest")["jobSpec"]["scheduling"]


@pytest.mark.parametrize("strategy,instead", [("ON_DEMAND", "STANDARD"), ("LOW_COST", "SPOT")])
def test_a_job_with_a_deprecated_strategy_round_trips_with_a_notice(strategy, instead):
    body = {"displayName": "old", "jobSpec": {"workerPoolSpecs": [pool(image=IMAGE)],
                                              "scheduling": {"strategy": strategy, "timeout": "3600s"}}}
    w = PoolConfigurator(spec=JobSpec.load(body))
    assert w.problems == [] and w.spec == JobSpec.load(body)
    assert f"scheduling.strategy: {strategy} is deprecated; use {instead}" in w.notices
    assert f"strategy: {strategy}" in w.export("yaml")
    assert values(w.access_section.controls["strategy"])[1:] == ["STANDARD", "SPOT", "FLEX_START", strategy]
    w.access_section.controls["strategy"].value = "SPOT"  # the user moves on: only the current ones are offered
    assert w.spec.spec.scheduling.strategy.name == "SPOT"
    assert values(w.access_section.controls["strategy"]) == ["", "STANDARD", "SPOT", "FLEX_START"]
    assert values(PoolConfigurator().access_section.controls["strategy"]) == ["", "STANDARD", "SPOT", "FLEX_START"]


def test_a_job_without_a_name_set_as_spec_keeps_the_configurators_name():
    configurator = vertex_pools(display_name="gpu-training")
    configurator.spec = {"workerPoolSpecs": [pool(1)]}  # a gcloud config: it holds no display name
    assert configurator.display_name == configurator.spec.display_name == "gpu-training"
    configurator.spec = {"displayName": "named", "jobSpec": {"workerPoolSpecs": [pool(1)]}}
    assert configurator.display_name == "named"


def test_an_invalid_replica_count_has_no_price():
    configurator = PoolConfigurator()
    configurator.cards[1].replicas.value = -3
    assert any("replicaCount" in problem for problem in configurator.problems)
    assert configurator.cost is None and configurator.cost_html.value == "" and "$-" not in configurator.to_text()
