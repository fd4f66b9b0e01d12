"""The read-only operator console (SPEC §10): an aiohttp app of its own.

Server-rendered HTML over the `ql_readonly` reads; every asset is served by the
console itself. `app.create_console_app` is the factory; `qinglong console`
(qinglong/console_cli.py) and `qinglong demo` run it.
"""
