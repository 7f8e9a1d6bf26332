"""What a job costs per hour: `cost.estimate`, `vtrain cost` and the configurator show the figures of
data/prices.json (computed again here from the file), label them an estimate with their date, and list
what has no price instead of guessing it."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, pool, vtrain_in_process, write_spec
from jupyter_ext import cost, scheduling
from jupyter_ext.spec import JobSpec
from widgets import PoolConfigurator

EXAMPLE = ROOT / "jupyter_ext" / "examples" / "multiworker.yaml"  # the codelab's layout
PRICES = json.loads((ROOT / "jupyter_ext" / "data" / "prices.json").read_text())
A100_1 = {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1}
A100_2 = {"machineType": "a2-highgpu-2g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 2}


def price(region: str, kind: str, name: str, spot: bool) -> float:
    return PRICES["regions"][region][kind][name]["spot" if spot else "on_demand"]


def codelab_per_hour(region: str, spot: bool) -> float:
    """Two replicas (chief and worker) on n1-standard-4, no GPUs."""
    return 2 * price(region, "machines", "n1-standard-4", spot)


def two_pool_a100_per_hour(spot: bool) -> float:
    """A primary a2-highgpu-1g with 1 A100 and two workers a2-highgpu-2g with 2 A100 each."""
    def vm(machine: str, gpus: int) -> float:
        return price("us-central1", "machines", machine, spot) + gpus * price(
            "us-central1", "accelerators", "NVIDIA_TESLA_A100", spot)
    return vm("a2-highgpu-1g", 1) + 2 * vm("a2-highgpu-2g", 2)


@pytest.fixture
def a100_job(tmp_path):
    return write_spec(tmp_path / "a100.json", [pool(machineSpec=A100_1), pool(replicas=2, machineSpec=A100_2)])


@pytest.mark.parametrize("region", ["us-central1", "europe-west4"])
def test_vtrain_cost_of_the_codelab_layout(capsys, region):
    code, out, err = vtrain_in_process(capsys, "cost", str(EXAMPLE), "--region", region)
    assert (code, err) == (0, "")
    on_demand, spot = codelab_per_hour(region, False), codelab_per_hour(region, True)
    assert f"Total: ${on_demand:.4f} per hour on demand (${spot:.4f} Spot)" in out.splitlines()
    assert spot < on_demand
    code, out, _ = vtrain_in_process(capsys, "cost", str(EXAMPLE), "--region", region, "--spot")
    assert f"Total: ${spot:.4f} per hour Spot (${on_demand:.4f} on demand)" in out.splitlines()
    assert f"copied {PRICES['date']}" in out and "estimate" in out  # labelled, with the date of the prices


def test_vtrain_cost_of_a_two_pool_a100_job(capsys, a100_job):
    code, out, _ = vtrain_in_process(capsys, "cost", str(a100_job), "--region", "us-central1")
    on_demand, spot = two_pool_a100_per_hour(False), two_pool_a100_per_hour(True)
    assert code == 0 and spot < on_demand
    assert f"Total: ${on_demand:.4f} per hour on demand (${spot:.4f} Spot)" in out.splitlines()
    rows = [line.split() for line in out.splitlines()[2:4]]
    each = price("us-central1", "machines", "a2-highgpu-2g", False) + 2 * price(
        "us-central1", "accelerators", "NVIDIA_TESLA_A100", False)
    assert rows[1] == ["1", "2", "a2-highgpu-2g", "2", "x", "NVIDIA_TESLA_A100", f"${each:.4f}", f"${2 * each:.4f}"]


def test_vtrain_cost_of_a_tuning_job_is_a_trial_times_the_trials_that_run_at_once(capsys, tmp_path):
    body = {"displayName": "tuned-a100", "maxTrialCount": 6, "parallelTrialCount": 3,
            "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                          "parameters": [{"parameterId": "units", "discreteValueSpec": {"values": [32, 64]}}]},
            "trialJobSpec": {"workerPoolSpecs": [pool(machineSpec=A100_1), pool(replicas=2, machineSpec=A100_2)]}}
    spec = tmp_path / "tuning.json"
    spec.write_text(json.dumps(body))
    code, out, _ = vtrain_in_process(capsys, "cost", str(spec), "--region", "us-central1")
    on_demand, spot = two_pool_a100_per_hour(False), two_pool_a100_per_hour(True)
    assert code == 0
    assert f"Total: ${on_demand:.4f} per hour on demand (${spot:.4f} Spot)" in out.splitlines()  # one trial
    assert (f"Tuning job: the table is one trial; 3 run at once (parallelTrialCount): up to ${3 * on_demand:.4f} "
            f"per hour on demand (${3 * spot:.4f} Spot)") in out.splitlines()


def test_the_region_comes_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("CLOUD_ML_REGION", "us-west2")
    _, out, _ = vtrain_in_process(capsys, "cost", str(EXAMPLE))
    assert out.startswith("Cost of multiworker in us-west2,")
    assert f"Total: ${codelab_per_hour('us-west2', False):.4f} per hour on demand" in out


def test_a_spot_job_is_priced_at_spot_prices(capsys, tmp_path):
    job = scheduling.apply(JobSpec.load(EXAMPLE), strategy="SPOT")
    path = tmp_path / "spot.json"
    path.write_text(job.dump("rest"))
    _, out, _ = vtrain_in_process(capsys, "cost", str(path), "--region", "us-central1")
    assert f"Total: ${codelab_per_hour('us-central1', True):.4f} per hour Spot" in out


def test_what_has_no_price_is_listed_not_guessed(capsys, a100_job):
    code, out, _ = vtrain_in_process(capsys, "cost", str(a100_job), "--region", "us-east4")
    assert code == 0
    assert "Not priced: workerPoolSpecs[0]: no price for a2-highgpu-1g in us-east4, NVIDIA_TESLA_A100 in us-east4" in out
    assert "Total: not priced (no prices for this job's machines in us-east4)" in out
    partial = JobSpec.load({"workerPoolSpecs": [pool(), pool(machine="n1-standard-8", accelerator="NVIDIA_H100_80GB",
                                                                accelerator_count=1)]})
    estimate = cost.estimate(partial, "us-central1")
    assert estimate.unpriced == ["workerPoolSpecs[1]: no price for NVIDIA_H100_80GB in us-central1"]
    assert estimate.on_demand == price("us-central1", "machines", "n1-standard-4", False)
    assert "Total of the priced pools:" in estimate.text() and "1 pool(s) not priced" in estimate.summary()


def test_a_job_vertex_would_refuse_is_not_priced(capsys, tmp_path):
    negative = write_spec(tmp_path / "negative.json", [pool(), pool(replicas=-3)])
    code, out, err = vtrain_in_process(capsys, "cost", str(negative))
    assert (code, out) == (2, "") and err.startswith("vtrain: error: workerPoolSpecs[1].replicaCount: ")
    assert len(err.splitlines()) == 1


def test_a_region_where_vertex_does_not_train_is_one_line(capsys):
    code, out, err = vtrain_in_process(capsys, "cost", str(EXAMPLE), "--region", "us-centrl1")
    assert (code, out) == (2, "")
    assert err == ("vtrain: error: region: Vertex AI custom training is not offered in 'us-centrl1' (not one of "
                   "gcloud's training regions; did you mean us-central1)\n")
    code, out, err = vtrain_in_process(capsys, "convert", str(EXAMPLE), "--to", "gcloud-command", "--region", "mars")
    assert (code, out) == (2, "") and err.startswith("vtrain: error: region: ")


def test_the_estimate_per_pool_and_for_the_job():
    estimate = cost.estimate(JobSpec.load(EXAMPLE), "us-central1")
    assert [(p.position, p.replicas, p.machine_type, p.on_demand) for p in estimate.pools] == [
        (0, 1, "n1-standard-4", 0.19), (1, 1, "n1-standard-4", 0.19)]
    assert estimate.on_demand == pytest.approx(codelab_per_hour("us-central1", False))
    assert estimate.spot == pytest.approx(codelab_per_hour("us-central1", True))
    assert estimate.summary() == (f"${estimate.on_demand:.4f}/h on demand, ${estimate.spot:.4f}/h Spot "
                                  f"({estimate.label})")
    assert estimate.label.startswith("estimate: Compute Engine list prices") and PRICES["date"] in estimate.label


def test_flex_start_says_its_prices_are_not_in_the_data():
    job = JobSpec.load({"workerPoolSpecs": [pool(machineSpec=A100_1)], "scheduling": {"strategy": "FLEX_START"}})
    assert "FLEX_START prices are not in the data" in cost.estimate(job, "us-central1").text()


def test_the_configurator_shows_the_same_number():
    w = PoolConfigurator(spec=EXAMPLE)
    on_demand, spot = codelab_per_hour("us-central1", False), codelab_per_hour("us-central1", True)
    assert f"${on_demand:.4f}/h on demand, ${spot:.4f}/h Spot" in w.cost_html.value
    assert w.cost.summary() == cost.estimate(w.spec, "us-central1").summary()
    w.region_picker.value = "europe-west4"  # the region picker drives the cost
    assert f"${codelab_per_hour('europe-west4', False):.4f}/h on demand" in w.cost_html.value
    assert f"cost: {w.cost.summary()}" in w.to_text()


def test_the_configurator_prices_a_two_pool_a100_job(a100_job):
    w = PoolConfigurator(spec=a100_job)
    assert f"${two_pool_a100_per_hour(False):.4f}/h on demand" in w.cost_html.value
    w.cards[1].replicas.value = 3
    three = two_pool_a100_per_hour(False) + (price("us-central1", "machines", "a2-highgpu-2g", False)
                                             + 2 * price("us-central1", "accelerators", "NVIDIA_TESLA_A100", False))
    assert f"${three:.4f}/h on demand" in w.cost_html.value


def displayed_pool_rows(widget) -> dict[str, list[str]]:
    """The configurator's per-pool cost rows as a user reads them: pool -> [shape, on demand, Spot]."""
    from html.parser import HTMLParser

    rows: list[list[str]] = []

    class Rows(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "tr" and "data-pool" in dict(attrs):
                rows.append([])
            elif tag == "td" and rows:
                rows[-1].append("")

        def handle_endtag(self, tag):
            if tag == "table":
                rows.append([])  # a later table is not the cost table

        def handle_data(self, data):
            if rows and rows[-1]:
                rows[-1][-1] += data

    Rows().feed(widget.cost_html.value)
    return {row[0]: row[1:] for row in rows if row}


def test_the_configurator_shows_each_pools_cost_and_names_the_unpriced(a100_job):
    w = PoolConfigurator(spec=a100_job)
    w.cards[2].enabled.value = True  # a third pool the data has no price for
    w.cards[2].machine.value = "e2-standard-8"

    def vm(machine: str, gpus: int, spot: bool) -> float:
        return price("us-central1", "machines", machine, spot) + gpus * price(
            "us-central1", "accelerators", "NVIDIA_TESLA_A100", spot)

    rows = displayed_pool_rows(w)
    assert rows["0 · Primary"] == ["1 x a2-highgpu-1g + 1 x NVIDIA_TESLA_A100",
                                   f"${vm('a2-highgpu-1g', 1, False):.4f}/h", f"${vm('a2-highgpu-1g', 1, True):.4f}/h"]
    assert rows["1 · Workers"] == ["2 x a2-highgpu-2g + 2 x NVIDIA_TESLA_A100",
                                   f"${2 * vm('a2-highgpu-2g', 2, False):.4f}/h",
                                   f"${2 * vm('a2-highgpu-2g', 2, True):.4f}/h"]
    assert rows["2 · Parameter servers"] == ["1 x e2-standard-8", "not priced", "not priced"]
    # the total covers the priced pools, says one is not, and is labelled an estimate with the prices' date
    text = w.cost_html.value
    assert f"${two_pool_a100_per_hour(False):.4f}/h on demand, ${two_pool_a100_per_hour(True):.4f}/h Spot; " \
           "1 pool(s) not priced" in text
    assert "estimate" in text and f"copied {PRICES['date']}" in text
    assert "not priced: workerPoolSpecs[2]: no price for e2-standard-8 in us-central1" in text
    assert text in w.to_html()
    w.cards[1].replicas.value = 3  # the rows follow the cards
    assert displayed_pool_rows(w)["1 · Workers"][1] == f"${3 * vm('a2-highgpu-2g', 2, False):.4f}/h"
