from django.apps import AppConfig


class ToolsConfig(AppConfig):
    """Tool registry, tool activity, network policy and the web/browser/shell tools."""

    name = "tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tools.registry import tools_register
        from tools.shell.tool import SHELL
        from tools.web.browser_read import BROWSER_READ
        from tools.web.read_url import READ_URL
        from tools.web.search import WEB_SEARCH

        tools_register([WEB_SEARCH, READ_URL, BROWSER_READ, SHELL])
        from flarebot.core.probes import probe_register
        from tools.shell.engine import docker_probe, sandbox_image_probe
        from tools.web.browser import chromium_probe

        probe_register("chromium", "Chromium (browser_read)", chromium_probe)
        probe_register("docker", "Docker engine (shell)", docker_probe)
        probe_register("sandbox_image", "Sandbox image (shell)", sandbox_image_probe)
