import re

import pytest
from google.cloud.aiplatform_v1.types import AcceleratorType

from jupyter_ext import catalog
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.spec import JobSpec

# vertex-facts.md D2, copied verbatim (brace lists expanded below).
D2 = (
    "a4x-highgpu-4g, a4-highgpu-8g, a3-ultragpu-8g, a3-megagpu-8g, a3-highgpu-{1,2,4,8}g, "
    "a2-ultragpu-{1,2,4,8}g, a2-highgpu-{1,2,4,8}g, a2-megagpu-16g, e2-standard-{4,8,16,32}, "
    "e2-highmem-{2,4,8,16}, e2-highcpu-{16,32}, n4-{standard,highmem,highcpu}-{2,4,8,16,32,48,64,80}, "
    "n2-standard-{4,8,16,32,48,64,80}, n2-highmem-{2,4,8,16,32,48,64,80}, n2-highcpu-{16,32,48,64,80}, "
    "n1-standard-{4,8,16,32,64,96}, n1-highmem-{2,4,8,16,32,64,96}, n1-highcpu-{16,32,64,96}, "
    "c2-standard-{4,8,16,30,60}, ct5lp-hightpu-{1t,4t,8t}, m1-ultramem-{40,80,160}, m1-megamem-96, "
    "g2-standard-{4,8,12,16,24,32,48,96}, g4-standard-{48,96,192,384}, cloud-tpu"
)
EXTRA = ["ct6e-standard-1t", "ct6e-standard-4t", "ct6e-standard-8t", "tpu7x-standard-4t"]


def expand(pattern: str) -> list[str]:
    m = re.search(r"\{([^}]*)\}", pattern)
    if not m:
        return [pattern]
    return [
        name
        for part in m.group(1).split(",")
        for name in expand(pattern[: m.start()] + part + pattern[m.end() :])
    ]


D2_NAMES = [n for item in re.split(r",\s(?![^{]*\})", D2) for n in expand(item.strip())]


def test_every_d2_machine_is_present():
    assert len(D2_NAMES) == 113
    assert set(D2_NAMES + EXTRA) == set(catalog.machine_names())
    assert len(catalog.machine_names()) == len(set(catalog.machine_names()))


def test_n1_standard_8():
    assert catalog.valid_accelerators("n1-standard-8") == {
        "NVIDIA_TESLA_P4": (1, 2, 4),
        "NVIDIA_TESLA_P100": (1, 2, 4),
        "NVIDIA_TESLA_T4": (1, 2, 4),
        "NVIDIA_TESLA_V100": (1, 2, 4, 8),
    }


def test_n1_bigger_machines():
    assert catalog.valid_accelerators("n1-standard-32")["NVIDIA_TESLA_V100"] == (4, 8)
    assert "NVIDIA_TESLA_P100" not in catalog.valid_accelerators("n1-standard-64")
    assert catalog.valid_accelerators("n1-highcpu-64")["NVIDIA_TESLA_P100"] == (4,)


def test_fixed_gpu_machines():
    assert catalog.valid_accelerators("a2-highgpu-2g") == {"NVIDIA_TESLA_A100": (2,)}
    assert catalog.valid_accelerators("g2-standard-24") == {"NVIDIA_L4": (2,)}
    assert catalog.machine("g2-standard-24").fixed_accelerator == ("NVIDIA_L4", 2)


def test_cpu_and_unknown_machines_take_nothing():
    assert catalog.valid_accelerators("e2-standard-4") == {}
    assert catalog.valid_accelerators("no-such-machine") == {}
    assert catalog.machine("no-such-machine") is None


def test_tpus():
    m = catalog.machine("ct5lp-hightpu-4t")
    assert m.kind == "tpu"
    assert m.tpu_topologies["2x2"] == (4, 1)
    assert m.tpu_topologies["16x16"] == (256, 64)
    assert m.tpu_accelerator_optional == ("TPU_V5_LITEPOD",)
    assert catalog.valid_accelerators("ct5lp-hightpu-4t") == {}
    assert catalog.machine("tpu7x-standard-4t").tpu_topologies["8x8x16"] == (1024, 256)
    tpu = catalog.valid_accelerators("cloud-tpu")
    assert {8, 32} <= set(tpu["TPU_V3"])
    assert set(tpu) == {"TPU_V2", "TPU_V3"}


def test_accelerator_names_are_enum_members():
    members = set(AcceleratorType.__members__)
    assert set(catalog.accelerator_names()) == members - {"ACCELERATOR_TYPE_UNSPECIFIED"}
    for m in catalog.machines():
        for name in catalog.valid_accelerators(m.name):
            assert name in members
        for name in m.tpu_accelerator_optional:
            assert name in members


def test_accelerator_info():
    assert catalog.accelerator_label("NVIDIA_TESLA_T4") == "NVIDIA T4"
    assert catalog.accelerator_kind("TPU_V3") == "tpu"
    assert catalog.accelerator_kind("NVIDIA_L4") == "gpu"
    assert catalog.is_deprecated("NVIDIA_TESLA_K80")
    assert catalog.is_deprecated("NVIDIA_TESLA_P100")
    assert not catalog.is_deprecated("NVIDIA_TESLA_V100")


def test_labels_and_families():
    assert catalog.machine("n1-standard-8").label == "n1-standard-8 — 8 vCPU, 30 GB"
    assert catalog.machine("cloud-tpu").label == "cloud-tpu"
    fams = catalog.families()
    assert [m.name for m in fams["ct5lp"]] == [
        "ct5lp-hightpu-1t",
        "ct5lp-hightpu-4t",
        "ct5lp-hightpu-8t",
    ]
    assert sum(len(v) for v in fams.values()) == len(catalog.machines())


def test_close_machine_names():
    assert "n1-standard-4" in catalog.close_machine_names("n1-standard-3")


def test_egress():
    assert catalog.egress_gbps("n1-highmem-96", "NVIDIA_TESLA_V100", 8) == 100
    assert catalog.egress_gbps("n1-highmem-96") == 32
    assert catalog.egress_gbps("n1-highcpu-16") == 32
    assert catalog.egress_gbps("a2-megagpu-16g") == 100
    assert catalog.egress_gbps("a4-highgpu-8g") == 400
    assert catalog.egress_gbps("e2-standard-4") == 8  # fallback estimate
    assert catalog.egress_gbps("cloud-tpu") is None


def test_reduction_server_worked_example():
    total = catalog.workers_bandwidth([("n1-highmem-96", "NVIDIA_TESLA_V100", 8, 5)])
    assert total == 500
    count, text = catalog.suggest_reducers(total)
    assert count == 16
    assert text == "500 Gbps / 32 Gbps per n1-highcpu-16 = 15.6 -> 16 reducers"


def test_reduction_server_best_practice_example():
    total = catalog.workers_bandwidth([("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16, 8)])
    count, text = catalog.suggest_reducers(total)
    assert count == 25
    assert text == "800 Gbps / 32 Gbps per n1-highcpu-16 = 25 -> 25 reducers"


def test_reducer_suggestion_of_a_job():
    """The worked example as a job: pools 0 and 1 count, the servers in pool 2 do not."""
    v100 = "machineSpec: {machineType: n1-highmem-96, acceleratorType: NVIDIA_TESLA_V100, acceleratorCount: 8}"
    job = JobSpec.load(f"""
workerPoolSpecs:
- {{{v100}, replicaCount: 1, containerSpec: {{imageUri: gcr.io/p/trainer:1}}}}
- {{{v100}, replicaCount: 4, containerSpec: {{imageUri: gcr.io/p/trainer:1}}}}
- {{machineSpec: {{machineType: n1-standard-4}}, replicaCount: 3, containerSpec: {{imageUri: gcr.io/p/trainer:1}}}}
""")
    assert catalog.reducer_suggestion(job) == (16, (
        "Workers: 1 x n1-highmem-96 with 8 x NVIDIA V100 at 100 Gbps + 4 x n1-highmem-96 with 8 x NVIDIA V100 "
        "at 100 Gbps = 500 Gbps. Reducers: 500 Gbps / 32 Gbps per n1-highcpu-16 = 15.6 -> 16 reducers "
        "(16 x n1-highcpu-16 = 512 Gbps)."))
    tpu = JobSpec.load("workerPoolSpecs: [{machineSpec: {machineType: cloud-tpu, acceleratorType: TPU_V2, "
                       "acceleratorCount: 8}, replicaCount: 1, containerSpec: {imageUri: gcr.io/p/trainer:1}}]")
    count, text = catalog.reducer_suggestion(tpu)
    assert count == 0 and "1 x cloud-tpu with 8 x TPU v2 (bandwidth unknown, counted as 0) = 0 Gbps" in text


def test_defaults_are_catalog_facts():
    assert catalog.machine(catalog.DEFAULT_MACHINE).name == "n1-standard-4"
    assert catalog.DEFAULT_REGION == "us-central1"


def test_suggest_reducers_needs_known_bandwidth():
    with pytest.raises(ValueError):
        catalog.suggest_reducers(100, "cloud-tpu")


def test_reduction_server_images():
    assert catalog.RECOMMENDED_REDUCER == "n1-highcpu-16"
    assert catalog.reduction_server_image() == (
        "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
    )
    assert catalog.reduction_server_image("europe-west4").startswith("europe-docker.pkg.dev/")
    assert catalog.reduction_server_image("asia-northeast1").startswith("asia-docker.pkg.dev/")
    assert catalog.reduction_server_image("us-central1").startswith("us-docker.pkg.dev/")
    assert catalog.is_reduction_server_image(catalog.reduction_server_image("europe-west1"))
    assert not catalog.is_reduction_server_image(
        "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"
    )


def test_the_data_names_only_accelerators_the_api_knows() -> None:
    assert catalog.data_problems() == []


# ---- issue 16: the catalog as Vertex AI has it today ------------------------------------------------------

def test_tpu7x_has_its_host_sizes_and_says_it_is_restricted():
    m = catalog.machine("tpu7x-standard-4t")
    assert (m.vcpus, m.memory_gb) == (224, 960)
    assert m.restricted and m.label == "tpu7x-standard-4t — 224 vCPU, 960 GB (restricted)"


def test_p100_is_past_its_end_of_support():
    assert catalog.is_deprecated("NVIDIA_TESLA_P100") and catalog.end_of_support("NVIDIA_TESLA_P100") == "2026-09-15"
    assert catalog.end_of_support("NVIDIA_TESLA_T4") == ""


def test_tpu_v4_pod_has_no_training_machine():
    assert not any("TPU_V4_POD" in catalog.valid_accelerators(m.name) or "TPU_V4_POD" in m.tpu_accelerator_optional
                   for m in catalog.machines())
    assert catalog.training_note("TPU_V4_POD").startswith("no Vertex AI training machine type takes it")
    assert catalog.training_note("TPU_V3") == ""


@pytest.mark.parametrize("accelerator,count,ok", [
    ("TPU_V2", 8, True), ("TPU_V2", 16, False), ("TPU_V2", 32, True), ("TPU_V2", 48, False), ("TPU_V2", 96, True),
    ("TPU_V3", 8, True), ("TPU_V3", 16, False), ("TPU_V3", 32, True), ("TPU_V3", 33, False), ("TPU_V3", 48, False),
    ("TPU_V3", 64, True), ("TPU_V3", 96, False), ("TPU_V3", 1024, True), ("TPU_V3", 2048, True),
    ("TPU_V3", 4096, False),
])
def test_cloud_tpu_counts(accelerator, count, ok):
    """v2: 8 or multiples of 32 (vertex-facts D4); v3: one device (v3-8) or one of the Pod slices Cloud TPU's
    TPU v3 page lists, v3-32 to v3-2048 (catalog.json `_tpu_counts_note`)."""
    assert catalog.is_valid_count("cloud-tpu", accelerator, count) is ok
    assert catalog.count_rule("cloud-tpu", "TPU_V2") == "8, or a multiple of 32"
    assert catalog.count_rule("cloud-tpu", "TPU_V3") == "8, 32, 64, 128, 256, 512, 1024, 2048"


def test_bandwidth_of_the_families_that_lacked_it():
    """2 Gbps per vCPU, capped per family (catalog.json `families`)."""
    assert catalog.egress_gbps("a2-highgpu-1g") == 24  # 12 vCPU
    assert catalog.egress_gbps("a2-highgpu-8g") == 100  # capped
    assert catalog.egress_gbps("a3-highgpu-8g") == 200
    assert catalog.egress_gbps("g2-standard-4") == 8
    assert catalog.egress_gbps("e2-standard-32") == 16
    assert catalog.egress_gbps("n4-standard-80") == 50
    assert catalog.egress_gbps("ct5lp-hightpu-4t") is None and catalog.egress_gbps("g4-standard-48") is None
    a100 = JobSpec.load("workerPoolSpecs: [{machineSpec: {machineType: a2-highgpu-8g, acceleratorType: "
                        "NVIDIA_TESLA_A100, acceleratorCount: 8}, replicaCount: 1, containerSpec: {imageUri: i}}]")
    assert catalog.reducer_suggestion(a100)[0] == 4  # 100 Gbps / 32: no longer "bandwidth unknown"


def test_every_family_has_an_architecture_and_a4x_is_arm64():
    assert {m.family for m in catalog.machines()} <= set(catalog._data()["families"])
    assert catalog.machine("a4x-highgpu-4g").architecture == "arm64"
    assert catalog.platform("a4x-highgpu-4g") == "linux/arm64"
    assert catalog.platform("n1-standard-4") == catalog.DEFAULT_PLATFORM == "linux/amd64"


def test_the_platform_of_a_job():
    def job(*machines):
        pools = ", ".join(f"{{machineSpec: {{machineType: {m}}}, replicaCount: 1, containerSpec: {{imageUri: {img}}}}}"
                          for m, img in machines)
        return JobSpec.load(f"workerPoolSpecs: [{pools}]")

    reducer = catalog.reduction_server_image()
    assert catalog.image_platform(job(("n1-standard-4", "i"), ("n1-standard-4", "i"))) == "linux/amd64"
    assert catalog.image_platform(job(("a4x-highgpu-4g", "i"), ("a4x-highgpu-4g", "i"),
                                      ("n1-highcpu-16", reducer))) == "linux/arm64"  # reducers run Google's image
    with pytest.raises(WorkbenchError, match=r"^machineSpec.machineType: one trainer image cannot run on two CPU "
                                             r"architectures \(workerPoolSpecs\[0\] linux/arm64, workerPoolSpecs\[1\] "
                                             r"linux/amd64\)"):
        catalog.image_platform(job(("a4x-highgpu-4g", "i"), ("n1-standard-4", "i")))


def test_training_regions_and_what_they_offer():
    regions = catalog.training_regions()
    assert len(regions) == 39 and "us-central1" in regions and "europe-west4" in regions
    assert catalog.availability("us-central1", "a3-highgpu-8g").status == "offered"
    assert catalog.availability("us-west2", "a3-highgpu-8g").status == "unavailable"
    assert catalog.availability("us-west2", "n1-standard-8", "NVIDIA_TESLA_T4").status == "offered"
    assert catalog.availability("us-west2", "n1-standard-8", "NVIDIA_TESLA_V100").status == "unavailable"
    assert catalog.availability("us-west2", "n1-standard-8").status == "offered"  # CPU machines: everywhere
    assert catalog.availability("europe-west8", "a3-highgpu-8g").status == "unknown"  # no data for the region
    assert catalog.availability("us-central1", "n1-standard-8", "NVIDIA_TESLA_K80").status == "unknown"  # not covered
    # Google's table lists TPU v3 in us-central1 but not TPU v3 Pod: a single host only
    assert catalog.availability("us-central1", "cloud-tpu", "TPU_V3", 8).status == "offered"
    assert catalog.availability("us-central1", "cloud-tpu", "TPU_V3", 32).status == "unavailable"
    assert catalog.availability("europe-west4", "cloud-tpu", "TPU_V3", 32).status == "offered"
    assert catalog.availability("us-central1", "ct6e-standard-4t").status == "unknown"
    assert catalog.unavailable("us-central1", "a3-highgpu-8g") is None
    assert "us-west2" in catalog.unavailable("us-west2", "a3-highgpu-8g")
