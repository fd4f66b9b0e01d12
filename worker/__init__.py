"""QingLong Dispatch worker runtime.

R-LAY-1: this package must stay importable on a small edge install. Importing
``worker`` (or the journal, lock, backoff and coordinator modules) loads only the
standard library; the HTTPS transport (``ssl``/``http.client``) and the offer
validation (``schemas``/``jsonschema``) are imported lazily by the code that uses
them. Never import aiohttp, psycopg, ``db`` or ``service`` from here.
"""
