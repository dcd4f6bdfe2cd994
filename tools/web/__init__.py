"""The web research tools: web_search, read_url and browser_read, behind one network policy."""
