"""`tidemark_mask_check`: a task that writes a connector's source password into its own
log on purpose, three ways (the task's logger, print to stdout, and a child process's
output relayed as Tidemark's operators relay the streamer's). Run by a real worker, its
stored log must show *** where the password was (tests/integration/test_airflow_live.py).
"""

from __future__ import annotations

import logging
import subprocess
import sys

import pendulum
from airflow.sdk import dag, get_current_context, task

CHILD = "import os, sys; print('MASKCHECK child ' + os.environ[sys.argv[1]], flush=True)"


@dag(
    dag_id="tidemark_mask_check",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"connector": "demo"},
    tags=["tidemark-tests"],
)
def tidemark_mask_check() -> None:
    @task
    def log_the_password() -> None:
        from tidemark_airflow.hooks.source import TidemarkSourceHook

        hook = TidemarkSourceHook(get_current_context()["params"]["connector"])
        config = hook.config()
        password = config.secret("database.password").reveal()
        log = logging.getLogger("tidemark.mask_check")
        log.info("MASKCHECK logger %s", password)
        print(f"MASKCHECK stdout {password}", flush=True)
        variable = config.get("database.password.env")
        child = subprocess.run(
            [sys.executable, "-c", CHILD, variable],
            env=hook.child_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        for line in child.stdout.splitlines():
            log.info("relayed: %s", line)

    log_the_password()


tidemark_mask_check()
