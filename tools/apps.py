from django.apps import AppConfig


class ToolsConfig(AppConfig):
    """Tool registry, tool activity, network policy and the web/browser/shell tools."""

    name = "tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tools.registry import tool_register
        from tools.web.browser_read import BROWSER_READ
        from tools.web.read_url import READ_URL
        from tools.web.search import WEB_SEARCH

        for tool in (WEB_SEARCH, READ_URL, BROWSER_READ):
            tool_register(tool)
        from flarebot.core.probes import probe_register
        from tools.web.browser import chromium_probe

        probe_register("chromium", "Chromium (browser_read)", chromium_probe)
