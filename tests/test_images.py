"""Build and push on a real engine and registry: progress events, the layer cache, errors, credentials."""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from services.docker_services import Services
from test_packaging import tiny_wheel

from jupyter_ext import build_cli, catalog, images, packaging
from jupyter_ext.images import BuildError, BuildStep, Built, EngineError, LayerProgress, Pushed, PushError
from widgets.build import BuildProgress


TASK = "import tinydep\nprint('version {n}', tinydep.VALUE)\n"


def _context(base: str, wheel: Path, version: str, marker: str = "") -> packaging.BuildContext:
    return packaging.build_context(TASK.format(n=version) + marker, requirements=[str(wheel)], base_image=base)


def _run(events: Any) -> list[Any]:
    return list(events)


def _layers(api: Any, ref: str) -> list[str]:
    return api.inspect_image(ref)["RootFS"]["Layers"]


def test_build_push_and_pull_by_digest(docker_env: Services, docker_api: Any, tmp_path: Path) -> None:
    ctx = _context(docker_env.base_image, tiny_wheel(tmp_path), "1", f"# {secrets.token_hex(8)}\n")
    repo = f"{docker_env.registry}/tests/pull"
    ref = f"{repo}:{ctx.tag}"
    events = _run(images.build(ctx, [ref, f"{repo}:mine"]))
    steps = [e for e in events if isinstance(e, BuildStep)]
    assert [(s.n, s.total) for s in steps] == [(n, 7) for n in range(1, 8)]
    assert steps[0].text == f"FROM {docker_env.base_image}" and steps[-1].text.startswith("ENTRYPOINT")
    built = events[-1]
    assert isinstance(built, Built) and built.tags == (ref, f"{repo}:mine")
    pushed = _run(images.push(ref))
    assert isinstance(pushed[-1], Pushed) and pushed[-1].digest.startswith("sha256:")
    assert any(isinstance(e, LayerProgress) and e.action == "push" and e.status in ("done", "exists")
               for e in pushed)
    digest = pushed[-1].digest
    progress = BuildProgress()  # the notebook's view of these events, as a saved notebook keeps it
    for event in [*events, *pushed]:
        progress.add(event)
    saved = progress._repr_mimebundle_()["text/plain"].splitlines()
    assert saved[0].startswith(f"Step 1/7 FROM {docker_env.base_image}") and saved[6].startswith("Step 7/7 ENTRYPOINT")
    assert saved[7:] == [f"built {ref}", f"image {pushed[-1].ref} digest {digest}"]

    for tag in (ref, f"{repo}:mine"):
        docker_api.remove_image(tag)
    with pytest.raises(docker.errors.NotFound):
        docker_api.inspect_image(built.image_id)  # gone from the engine: the pull must fetch it
    pulled = _run(images.pull(f"{repo}@{digest}"))
    assert isinstance(pulled[-1], images.Pulled) and pulled[-1].digest == digest
    assert docker_api.inspect_image(f"{repo}@{digest}")["Id"] == built.image_id  # the same image, by content
    docker_api.remove_image(f"{repo}@{digest}")


def test_a_code_edit_reuses_every_dependency_layer(docker_env: Services, docker_api: Any, tmp_path: Path) -> None:
    wheel = tiny_wheel(tmp_path)
    marker = f"# {secrets.token_hex(8)}\n"  # this test's own code layer, whatever ran before
    repo = f"{docker_env.registry}/tests/edit"
    first = _context(docker_env.base_image, wheel, "1", marker)
    _run(images.build(first, f"{repo}:{first.tag}"))
    _run(images.push(f"{repo}:{first.tag}"))

    edited = _context(docker_env.base_image, wheel, "2", marker)  # one line of task.py changed
    assert {k for k in first.files if first.files[k] != edited.files[k]} == {"trainer/task.py"}
    events = _run(images.build(edited, f"{repo}:{edited.tag}"))
    steps = {s.text.split()[0] + " " + s.text.split()[1]: s for s in events if isinstance(s, BuildStep)}
    for dependency_step in ("WORKDIR /", "COPY deps", "COPY requirements.txt", "RUN python"):
        assert steps[dependency_step].cached, dependency_step
    assert not steps["COPY trainer"].cached
    assert not any(isinstance(e, images.BuildOutput) for e in events)  # pip did not run again

    old, new = _layers(docker_api, f"{repo}:{first.tag}"), _layers(docker_api, f"{repo}:{edited.tag}")
    assert len(old) == len(new) and old[:-1] == new[:-1] and old[-1] != new[-1]  # only the code layer changed
    pushed = _run(images.push(f"{repo}:{edited.tag}"))
    uploaded = {e.layer_id for e in pushed if isinstance(e, LayerProgress) and e.status == "done"}
    reused = {e.layer_id for e in pushed if isinstance(e, LayerProgress) and e.status == "exists"}
    assert len(uploaded) == 1 and len(reused) == len(new) - 1
    for ref in (f"{repo}:{first.tag}", f"{repo}:{edited.tag}"):
        docker_api.remove_image(ref)


def test_a_failing_step_is_one_error_naming_the_step(docker_env: Services, tmp_path: Path) -> None:
    broken = tmp_path / "broken-0.1-py3-none-any.whl"
    broken.write_bytes(b"this is not a zip file")
    ctx = packaging.build_context("print(1)\n", requirements=[str(broken)], base_image=docker_env.base_image)
    events: list[Any] = []
    with pytest.raises(BuildError) as err:
        events.extend(images.build(ctx, "vtrain-test/broken:1"))
    message = str(err.value)
    assert message.startswith("Step 5/7 RUN python -m pip install --no-cache-dir -r /requirements.txt: "
                              "The command '/bin/sh -c python -m pip install")
    assert "returned a non-zero code: 1" in message and "\n" not in message
    assert isinstance(events[-1], images.Failure) and events[-1].message == message

    missing = packaging.build_context("print(1)\n", base_image="vtrain-test/no-such-image:1")
    with pytest.raises(BuildError, match=r"^Step 1/4 FROM vtrain-test/no-such-image:1: .*(not found|denied|"
                                         r"does not exist|no such host|dial|lookup)"):
        _run(images.build(missing, "vtrain-test/broken:2"))


def test_push_errors_name_the_registry(docker_env: Services, docker_api: Any) -> None:
    ctx = packaging.build_context("print(1)\n", base_image=docker_env.base_image)
    ref = f"127.0.0.1:1/tests/nowhere:{ctx.tag}"  # nothing listens on port 1
    _run(images.build(ctx, ref))
    with pytest.raises(PushError, match=r"^cannot push 127\.0\.0\.1:1/tests/nowhere:\w+ to registry 127\.0\.0\.1:1: "
                                        r".*connection refused"):
        _run(images.push(ref))
    docker_api.remove_image(ref)
    with pytest.raises(PushError, match=f"cannot push {docker_env.registry}/tests/absent:1 to registry "):
        _run(images.push(f"{docker_env.registry}/tests/absent:1"))  # no such image on the engine


def test_an_unreachable_engine_is_one_readable_error(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/no-engine.sock"
    with pytest.raises(EngineError, match=f"^cannot reach the Docker engine at {url}: No such file or directory$"):
        _run(images.build(packaging.build_context("print(1)\n"), "x:1", engine=url))


def test_vtrain_build_pushes_with_credentials_from_a_helper_and_never_prints_them(
        docker_env: Services, docker_api: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # A credential helper like docker-credential-gcloud, found through the Docker config.
    token = f"tok-{secrets.token_hex(12)}"
    bin_dir, config_dir, calls = tmp_path / "bin", tmp_path / "docker-config", tmp_path / "helper-calls"
    bin_dir.mkdir()
    config_dir.mkdir()
    helper = bin_dir / "docker-credential-vtraintest"
    helper.write_text(f"#!{sys.executable}\nimport json, sys\nserver = sys.stdin.read().strip()\n"
                      f"open({str(calls)!r}, 'a').write(sys.argv[1] + ' ' + server + '\\n')\n"
                      f"print(json.dumps({{'ServerURL': server, 'Username': 'oauth2accesstoken', "
                      f"'Secret': {token!r}}}))\n")
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    (config_dir / "config.json").write_text(json.dumps({"credHelpers": {docker_env.registry: "vtraintest"}}))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_CONFIG", str(config_dir))
    folder = tmp_path / "my-trainer" / "trainer"
    folder.mkdir(parents=True)
    (folder / "task.py").write_text(f"print('hello')  # {secrets.token_hex(4)}\n")
    (folder / ".env").write_text(f"TOKEN={token}\n")

    code = build_cli.main([str(folder.parent), "--image", f"{docker_env.registry}/tests/cli:v1", "--base-image",
                           docker_env.base_image, "--push", "--context-dir", str(tmp_path / "ctx")])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert token not in out.out + out.err
    assert f"get {docker_env.registry}" in calls.read_text()  # the helper was asked for this registry
    lines = out.out.splitlines()
    assert lines[0].startswith("context ") and "left out: trainer/.env" in lines[0]
    assert any(line.startswith("Step 3/4 COPY trainer /trainer") for line in lines)
    last = lines[-1]
    assert last.startswith(f"vtrain: image {docker_env.registry}/tests/cli@sha256:")
    assert f"{docker_env.registry}/tests/cli:v1" in last
    assert sorted(p.name for p in (tmp_path / "ctx").iterdir()) == [".dockerignore", "Dockerfile", "trainer"]
    for tag in last.split("(tags: ", 1)[1].rstrip(")").split(", "):
        docker_api.remove_image(tag)

    code = build_cli.main([str(folder.parent), "--push"])
    assert code == 2 and "--push needs --image" in capsys.readouterr().err


# ---- the target platform (issue 16: arm64 machines need arm64 images) ----------------------------------

def test_a_build_names_its_platform(docker_env: Services, docker_api: Any) -> None:
    """The image is built for the platform asked for, not the engine's own: linux/amd64 by default,
    linux/arm64 for A4X (a context FROM scratch needs no arm64 base image or emulator)."""
    marker = secrets.token_hex(8).encode()
    context = {"Dockerfile": b"FROM scratch\nCOPY marker /marker\n", "marker": marker}
    for platform, architecture in (("linux/arm64", "arm64"), (catalog.DEFAULT_PLATFORM, "amd64")):
        ref = f"vtrain-test/platform:{architecture}-{marker.decode()}"
        built = _run(images.build(context, ref, platform=platform))[-1]
        assert isinstance(built, Built)
        info = docker_api.inspect_image(built.image_id)
        assert (info["Os"], info["Architecture"]) == ("linux", architecture)
        docker_api.remove_image(ref)


def test_the_default_build_is_for_vertex_ais_x86_machines(docker_env: Services, docker_api: Any) -> None:
    ctx = packaging.build_context(f"print(1)  # {secrets.token_hex(4)}\n", base_image=docker_env.base_image)
    ref = f"vtrain-test/default-platform:{ctx.tag}"
    built = _run(images.build(ctx, ref))[-1]
    assert docker_api.inspect_image(built.image_id)["Architecture"] == "amd64"
    docker_api.remove_image(ref)


def test_arm64_builds_get_their_own_content_tag() -> None:
    ctx = packaging.build_context("print(1)\n")
    assert images.image_tags(None, ctx, "t") == [f"vtrain/t:{ctx.tag}"]
    assert images.image_tags(None, ctx, "t", "linux/arm64") == [f"vtrain/t:{ctx.tag}-arm64"]
    assert images.image_tags("r.io/p/t:v1", ctx, "t", "linux/arm64") == [f"r.io/p/t:{ctx.tag}-arm64", "r.io/p/t:v1"]


def test_vtrain_build_picks_the_platform_of_a_machine_type(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_cli.argparse.ArgumentParser()
    build_cli.add_parser(parser.add_subparsers())
    for argv, platform in ((["build", "x.py"], "linux/amd64"), (["build", "x.py", "--machine-type", "a4x-highgpu-4g"],
                                                                 "linux/arm64"),
                           (["build", "x.py", "--platform", "linux/arm64"], "linux/arm64")):
        assert build_cli._platform(parser.parse_args(argv)) == platform
    assert build_cli.main(["x.py", "--machine-type", "a9-nothing"]) == 2
    assert capsys.readouterr().err == ("vtrain: error: --machine-type: 'a9-nothing' is not a Vertex AI training "
                                       "machine type\n")
