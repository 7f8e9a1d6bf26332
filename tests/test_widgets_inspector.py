"""ClusterInspector: the same replicas as `vtrain inspect`, their CLUSTER_SPEC and
TF_CONFIG, and a picture with evaluators outside the training cluster."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import pool, vtrain_in_process, write_file
from jupyter_ext.spec import JobSpec
from widgets import ClusterInspector, PoolConfigurator
from widgets.tables import INSPECTOR_COLUMNS, env_json

SPECS = Path(__file__).parent / "data" / "specs"
SVG = "{http://www.w3.org/2000/svg}"


def four_pool_job(tmp_path):
    return write_file(tmp_path / "four.json", {"displayName": "four", "jobSpec": {
        "workerPoolSpecs": [pool(1), pool(2), pool(1), pool(2)],
        "baseOutputDirectory": {"outputUriPrefix": "gs://b/out"}}})


def cli_rows(capsys, *argv):
    code, out, _ = vtrain_in_process(capsys, "inspect", *argv, "--json")
    assert code == 0
    return json.loads(out)


KEYS = ["task_name", "role", "index", "address"]


@pytest.mark.parametrize("style", ["cloud", "process", "docker"])
def test_rows_match_vtrain_inspect(tmp_path, capsys, style):
    path = four_pool_job(tmp_path)
    expected = [{k: r[k] for k in KEYS} for r in cli_rows(capsys, str(path), "--addresses", style)]
    inspector = ClusterInspector(str(path), style=style)
    assert inspector.table[KEYS].to_dict("records") == expected
    tf_tasks = [f"{r['tf_task']}:{r['index']}" if r["tf_task"] else "-"
                for r in cli_rows(capsys, str(path), "--addresses", style)]
    assert list(inspector.table["tf_config_task"]) == tf_tasks


@pytest.mark.parametrize("name", ["rest_custom_job.yaml", "legacy_config.yaml", "sdk_job.json"])
def test_rows_match_vtrain_inspect_for_every_format(capsys, name):
    expected = [{k: r[k] for k in KEYS} for r in cli_rows(capsys, str(SPECS / name))]
    assert ClusterInspector(SPECS / name).table[KEYS].to_dict("records") == expected


def test_table_columns_and_tf_config_tasks(tmp_path):
    inspector = ClusterInspector(four_pool_job(tmp_path))
    assert list(inspector.table.columns) == INSPECTOR_COLUMNS
    assert list(inspector.table["tf_config_task"]) == ["chief:0", "worker:0", "worker:1", "ps:0", "evaluator:0",
                                                       "evaluator:1"]
    assert "TF_CONFIG task" in inspector.table_html.value and "cmle-training-workerpool3" in inspector.table_html.value


def test_single_replica_has_no_tf_config():
    inspector = ClusterInspector({"workerPoolSpecs": [pool(1)]})
    assert list(inspector.table["tf_config_task"]) == ["-"]
    assert "not set (single-replica job)" in inspector.env_html.value


def test_legacy_toggle_names_the_primary_master():
    job = {"jobId": "census", "trainingInput": {"scaleTier": "CUSTOM", "masterType": "standard",
                                                "masterConfig": {"imageUri": "gcr.io/p/census:1"},
                                                "workerType": "standard", "workerCount": 2}}
    inspector = ClusterInspector(job)
    assert inspector.legacy_toggle.value is False  # what the job gets when it runs, on Vertex AI or here
    assert inspector.table["tf_config_task"][0] == "chief:0"
    assert '"type": "chief"' in inspector.env_html.value
    inspector.legacy_toggle.value = True  # what it got on AI Platform
    assert inspector.legacy is True
    assert inspector.table["tf_config_task"][0] == "master:0"
    assert '"type": "master"' in inspector.env_html.value


def test_selected_replica_shows_cluster_spec_and_tf_config(tmp_path):
    inspector = ClusterInspector(four_pool_job(tmp_path))
    assert inspector.replica_picker.options == tuple(inspector.table["task_name"])
    inspector.replica_picker.value = "workerpool1-1"
    assert inspector.selected == "workerpool1-1"
    replica = inspector.selected_replica
    html = inspector.env_html.value
    assert "CLUSTER_SPEC of workerpool1-1" in html and "TF_CONFIG of workerpool1-1" in html
    tf_config = json.loads(replica.env["TF_CONFIG"])
    assert tf_config["task"] == {"type": "worker", "index": 1}
    assert env_json(replica, "TF_CONFIG") == json.dumps(tf_config, indent=2)


def test_selected_replica_shows_its_pytorch_variables(tmp_path):
    inspector = ClusterInspector(four_pool_job(tmp_path), style="docker")
    inspector.replica_picker.value = "workerpool1-0"
    html = inspector.env_html.value
    assert "PyTorch variables of workerpool1-0" in html
    assert html.index("TF_CONFIG of workerpool1-0") < html.index("PyTorch variables of workerpool1-0")
    for line in ("MASTER_ADDR=workerpool0-0", "MASTER_PORT=2222", "WORLD_SIZE=4", "RANK=1"):
        assert line in html
    assert "no RANK" not in html
    inspector.replica_picker.value = "workerpool3-1"  # an evaluator: outside the training cluster
    html = inspector.env_html.value
    assert "MASTER_ADDR=workerpool0-0" in html and "RANK=" not in html and "WORLD_SIZE=" not in html
    assert "no RANK or WORLD_SIZE: evaluator replicas are not in the training cluster" in html


def test_a_reduction_server_replica_has_no_rank():
    layout = PoolConfigurator(spec={"workerPoolSpecs": [pool(1), pool(2)]})
    layout.cards[2].mode.value = "reduction_server"
    inspector = ClusterInspector(layout)
    inspector.replica_picker.value = "workerpool2-0"
    html = inspector.env_html.value
    assert "no RANK or WORLD_SIZE: reduction server replicas are not in the training cluster" in html
    inspector.replica_picker.value = "workerpool1-1"
    assert "WORLD_SIZE=3" in inspector.env_html.value and "RANK=2" in inspector.env_html.value


def test_trial_and_address_style(tmp_path):
    inspector = ClusterInspector(four_pool_job(tmp_path))
    inspector.trial_text.value = "3"
    spec = json.loads(inspector.selected_replica.env["CLUSTER_SPEC"])
    assert spec["task"]["trial"] == "3"
    inspector.style_toggle.value = "docker"
    assert inspector.table["address"][0] == "workerpool0-0:2222"


def test_svg_draws_evaluators_outside_the_training_cluster(tmp_path):
    inspector = ClusterInspector(four_pool_job(tmp_path))
    root = ET.fromstring(inspector.svg())
    frame = root.find(f"{SVG}g[@id='training-cluster']")
    inside = [g.get("data-task") for g in frame.iter(f"{SVG}g") if g.get("class") == "replica"]
    assert inside == ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool2-0"]
    assert not [g for g in frame.iter(f"{SVG}g") if g.get("data-role") == "evaluator"]
    outside = root.find(f"{SVG}g[@id='evaluators']")
    assert [g.get("data-task") for g in outside.iter(f"{SVG}g") if g.get("class") == "replica"] == [
        "workerpool3-0", "workerpool3-1"]
    labels = "".join(root.itertext())
    assert all(address in labels for address in inspector.table["address"])
    assert inspector.picture.value == inspector.svg()


def test_svg_names_the_reduction_server():
    layout = PoolConfigurator(spec={"workerPoolSpecs": [pool(1), pool(2)]})
    layout.cards[2].mode.value = "reduction_server"
    root = ET.fromstring(ClusterInspector(layout).svg())
    roles = [g.get("data-role") for g in root.iter(f"{SVG}g") if g.get("class") == "replica"]
    assert roles == ["primary", "worker", "worker", "reduction_server"]


def test_follows_a_pool_configurator():
    layout = PoolConfigurator()
    inspector = ClusterInspector(layout)
    assert list(inspector.table["task_name"]) == ["workerpool0-0", "workerpool1-0"]
    layout.cards[1].replicas.value = 3
    assert list(inspector.table["task_name"]) == ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2"]
    layout.cards[3].enabled.value = True
    assert inspector.table["tf_config_task"].iloc[-1] == "evaluator:0"
    layout.spec = SPECS / "legacy_config.yaml"
    assert inspector.job == JobSpec.load(SPECS / "legacy_config.yaml")


def test_static_output_for_nbconvert(tmp_path):
    inspector = ClusterInspector(four_pool_job(tmp_path))
    bundle = inspector._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == inspector.to_html()
    assert "<svg" in bundle["text/html"] and "workerpool3-1" in bundle["text/html"]
    assert "CLUSTER_SPEC of workerpool0-0" in bundle["text/html"]
    assert "workerpool0-0" in bundle["text/plain"] and "chief:0" in bundle["text/plain"]
