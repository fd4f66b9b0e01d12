"""R-LAY-2/R-LAY-3: the wheel holds one import package, `qinglong`, with its SQL and
JSON as package data, and an installed copy works without the source tree.

The wheel is built from this checkout with `pip wheel --no-deps .`, installed into
a fresh virtual environment (which sees the already-installed dependencies, but
not this checkout: the commands run from an empty directory), and then migrates a
real database and serves real TLS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.ingress_harness import INGRESS_ROLE, ensure_ingress_role, make_pki
from tests.py.security_support import start_ingress_process

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # From a copy without build outputs: a stale build/lib must not leak into the wheel.
    source = tmp_path_factory.mktemp("source") / "qinglong-dispatch"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
        ),
    )
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--disable-pip-version-check", "-w", str(out), str(source)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    (built,) = out.glob("qinglong_dispatch-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A venv holding the wheel; its dependencies come from the outer site-packages."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
                    "install", "--no-deps", "--ignore-installed", "--quiet",
                    "--disable-pip-version-check", str(wheel)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    yield env_dir


def test_a_plain_checkout_imports_the_mapped_packages_without_an_install() -> None:
    """qinglong/{db,service,worker,schemas} are relative links to the top-level folders,
    mirroring pyproject's package-dir: a checkout imports `qinglong.*` (and mypy follows
    it) with no editable install's import hook."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    for package, folder in mapping.items():
        if package != "qinglong":
            link = ROOT / "qinglong" / package.removeprefix("qinglong.")
            assert link.is_symlink() and os.readlink(link) == f"../{folder}", link
    # -S: site-packages are added as plain paths, so no .pth file (the editable
    # install's finder) runs; only the checkout can provide `qinglong`.
    code = (
        "import json, site, sys; sys.path.extend(site.getsitepackages());"
        "import qinglong.service.views, qinglong.worker.runner, qinglong.db.api,"
        " qinglong.schemas, qinglong.cli;"
        "print(json.dumps([[m.__file__ for n, m in sys.modules.items()"
        " if n.startswith('qinglong')], [n for n in sys.modules if 'editable' in n]]))"
    )
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    files, hooks = json.loads(done.stdout)
    assert hooks == [] and len(files) > 5
    assert all(Path(f).is_relative_to(ROOT / "qinglong") for f in files), files


def _top_level(names: list[str]) -> set[str]:
    return {name.split("/", 1)[0] for name in names}


def test_wheel_has_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = _top_level(names)
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == {"qinglong"}, sorted(top)
    assert len(dist_info) == 1
    packages = {n.split("/")[1] for n in names if n.startswith("qinglong/") and n.count("/") >= 2}
    assert {"db", "service", "worker", "schemas"} <= packages
    assert not packages & {"bench", "chaos", "tools", "tests"}, sorted(packages)
    assert not [n for n in names if "/bench/" in n or "/chaos/" in n or n.startswith("tools/")]
    # Package data: every migration, function and schema of the checkout.
    for folder, pattern in (
        ("db/migrations", "*.sql"),
        ("db/functions", "*.sql"),
        ("schemas", "*.json"),
    ):
        expected = {f"qinglong/{folder}/{p.name}" for p in (ROOT / folder).glob(pattern)}
        assert expected and expected <= set(names), sorted(expected - set(names))[:5]
    assert "qinglong/db/functions/ORDER" in names
    assert "qinglong/db/bootstrap.sql" in names
    assert "qinglong/client.py" in names  # the producer API client (SPEC §13.5)
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [n for n in names if n.endswith("entry_points.txt")]
        assert "qinglong = qinglong.cli:main" in archive.read(entry_points).decode()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        # httpx is the client extra's, never a base dependency (the worker never needs it).
        requires = [
            line
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist: httpx")
        ]
        assert requires and all('extra == "client"' in line for line in requires), requires


def test_installed_wheel_migrates_and_serves_without_the_checkout(
    installed: Path, empty_db_dsn: str, pg_cluster: ThrowawayPostgres, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    python = installed / "bin" / "python"
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import qinglong.db, qinglong.service.app as a, sys;"
            "print(qinglong.db.__file__); print(a.__file__); print('tools' in sys.modules)",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    files = where.stdout.split()
    assert all(f.startswith(str(installed)) for f in files[:2]), files
    assert files[2] == "False"
    qinglong = installed / "bin" / "qinglong"
    migrated = subprocess.run(
        [str(qinglong), "db", "migrate", "--dsn", empty_db_dsn],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrated.returncode == 0, migrated.stderr
    assert len(json.loads(migrated.stdout)["applied"]) == len(
        list((ROOT / "db/migrations").glob("*.sql"))
    )
    with psycopg.connect(empty_db_dsn) as conn:
        functions = conn.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n"
            " ON n.oid = p.pronamespace WHERE n.nspname = 'ql'"
        ).fetchone()
    assert functions[0] > 0
    bench = subprocess.run(
        [str(qinglong), "bench", "sql"], cwd=elsewhere, capture_output=True, text=True, timeout=60
    )
    assert bench.returncode == 2 and "python -m tools.bench" in bench.stderr
    ensure_ingress_role(empty_db_dsn)
    ingress_dsn = pg_cluster.dsn(conninfo_to_dict(empty_db_dsn)["dbname"], user=INGRESS_ROLE)
    ingress = start_ingress_process(
        tmp_path, make_pki(tmp_path / "pki"), ingress_dsn, command=(str(qinglong),), cwd=elsewhere
    )
    try:
        assert ingress.port > 0
        assert "qinglong_" in ingress.metrics_text()
    finally:
        ingress.stop()
