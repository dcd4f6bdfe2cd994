"""The production compose file describes the documented topology."""

import ipaddress
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_it_defines_every_production_process():
    services = compose()["services"]
    assert {"web", "worker", "beat", "redis", "postgres", "migrate", "sandbox-engine"} <= set(services)


def test_it_checks_the_health_of_long_running_services():
    services = compose()["services"]
    for name in ("web", "worker", "redis", "postgres", "sandbox-engine"):
        assert "test" in services[name]["healthcheck"], name


def test_it_keeps_data_in_named_volumes():
    document = compose()
    assert {"flarebot-data", "redis-data", "postgres-data"} <= set(document["volumes"])
    assert "postgres-data:/var/lib/postgresql/data" in document["services"]["postgres"]["volumes"]


def test_it_hands_secrets_over_as_files_never_inline():
    document = compose()
    web = document["services"]["web"]
    assert web["environment"]["FLAREBOT_SECRET_KEY_FILE"].startswith("/run/secrets/")
    assert web["environment"]["DATABASE_URL_FILE"].startswith("/run/secrets/")
    for service in document["services"].values():
        for key in service.get("environment", {}):
            assert not key.endswith(("SECRET_KEY", "PASSWORD", "DATABASE_URL")), key
    for secret in document["secrets"].values():
        assert secret["file"].startswith("deploy/secrets/")


def test_it_never_mounts_the_host_docker_socket():
    text = (ROOT / "docker-compose.yml").read_text()
    assert "docker.sock" not in text
    assert compose()["services"]["worker"]["environment"]["DOCKER_HOST"] == "tcp://sandbox-engine:2376"


def test_it_builds_the_sandbox_image_into_the_sandbox_engine():
    services = compose()["services"]
    builder = services["sandbox-image"]
    assert builder["command"] == ["python", "manage.py", "build_sandbox_image"]
    assert builder["environment"]["DOCKER_HOST"] == services["worker"]["environment"]["DOCKER_HOST"]
    assert builder["depends_on"] == {"sandbox-engine": {"condition": "service_healthy"}}
    assert services["sandbox-engine"]["command"] == ["--bridge=none", "--iptables=false", "--ip6tables=false"]


def test_it_runs_the_worker_on_every_queue_and_beat_once():
    services = compose()["services"]
    worker_command = services["worker"]["command"]
    assert worker_command[worker_command.index("-Q") + 1] == "turns,tools,default"
    assert services["beat"]["deploy"]["replicas"] == 1


def test_it_lets_web_believe_x_forwarded_for_only_from_its_own_network():
    document = compose()
    web = document["services"]["web"]
    subnet = document["networks"]["default"]["ipam"]["config"][0]["subnet"]

    assert "--proxy-headers" not in web["command"]
    assert web["environment"]["FLAREBOT_TRUSTED_PROXIES"] == subnet
    assert ipaddress.ip_network(subnet).is_private


def test_it_installs_chromium_in_the_image_for_browser_read():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "apt-get install" in dockerfile
    assert " chromium " in dockerfile
