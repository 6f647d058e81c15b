"""deployments/docker: the image installs the stack as .ci/setup does, and its deployment
runs in the image's copy of the repository with the record from the work pool's environment.
Docker's daemon is absent where the suite usually runs: the build itself is tested only where
``docker info`` answers."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest
import yaml

from tests.deploy._processes import REPO

DOCKER = REPO / "deployments" / "docker"
SETUP = REPO / ".ci" / "setup"


def _pip_installs(text: str) -> list[tuple[list[str], list[str]]]:
    """Every ``pip install`` of a shell script or Dockerfile: (requirements, options), in order
    (options without their quiet flag and the index they take wheels from)."""
    text = text.replace("\\\n", " ")
    found = []
    for command in re.findall(r"pip\"? install ([^\n&;]+)", text):
        words = shlex.split(command)
        requirements, options = [], []
        while words:
            word = words.pop(0)
            if word in ("-q", "--quiet"):
                continue
            if word == "--index-url":
                words.pop(0)
            elif word in ("-c", "--constraint"):
                options += [word, words.pop(0)]
            elif word.startswith("-") and word != "-e":
                options.append(word)
            elif word != "-e":
                requirements.append(word)
        found.append((requirements, options))
    return found


def test_the_image_installs_the_stack_in_the_steps_and_pins_of_ci_setup():
    setup = _pip_installs(SETUP.read_text())
    image = _pip_installs((DOCKER / "Dockerfile").read_text())
    assert len(setup) == len(image) == 3, (setup, image)
    # torch's CPU wheel first, alone, at the same pin
    assert image[0] == setup[0] == (["torch==2.13.0"], [])
    # then the project under the same constraints (the image: no dev or docs extras, and
    # the postgres extra for the shared record, pinned by the same constraints)
    assert setup[1][1] == image[1][1] == ["-c", ".ci/constraints.txt"]
    assert setup[1][0] == [".[dev,docs]"]
    assert image[1][0] == [".[postgres]"]
    constraints = (REPO / ".ci" / "constraints.txt").read_text().splitlines()
    assert any(line.startswith("psycopg-binary==") for line in constraints)
    # then the embedded model's package without its dependencies, at the same pin
    assert image[2] == setup[2]
    assert image[2][1] == ["--no-deps"]


def test_the_docker_deployment_runs_in_the_image_with_the_record_from_the_pool():
    workdir = re.search(r"^WORKDIR (\S+)$", (DOCKER / "Dockerfile").read_text(), re.M)
    spec = yaml.safe_load((DOCKER / "prefect.yaml").read_text())
    assert workdir is not None
    assert spec["pull"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": workdir.group(1)}}
    ]
    (deployment,) = spec["deployments"]
    assert deployment["entrypoint"] == "flows.scheduled.scheduled_audit"
    assert (REPO / deployment["parameters"]["config_path"]).is_file()
    assert "db" not in deployment["parameters"]  # the pool's DBPA_DB, never a parameter
    pool = deployment["work_pool"]
    assert pool["name"] == "dbpa-docker"
    assert pool["job_variables"]["image"] == "dbpa-worker:latest"
    assert not {"DBPA_DB", "PGPASSWORD"} & set(pool["job_variables"]["env"])
    ignored = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", ".git", "*.duckdb"} <= set(ignored)


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=30)
    return done.returncode == 0


@pytest.mark.slow
def test_the_image_builds_and_runs_dbpa():
    if not _docker_answers():
        pytest.skip("no Docker daemon answers `docker info`")
    tag = "dbpa-worker:test"
    build = ["docker", "build", "-f", str(DOCKER / "Dockerfile"), "-t", tag, str(REPO)]
    subprocess.run(build, check=True, timeout=1800)
    try:
        done = subprocess.run(
            ["docker", "run", "--rm", tag, "dbpa", "validate", "examples/personas.yaml"],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    finally:
        subprocess.run(["docker", "image", "rm", tag], check=False, timeout=120)
