"""The JSON HTTP API (aiohttp)."""
