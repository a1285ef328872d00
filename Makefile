# Tidemark: the two commands are `make demo` and `make test`; both install what they
# need first (idempotently), so they work straight after `git clone`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PY := .venv/bin/python
SERVICES := $(PY) -m scripts.services
PYTEST_ARGS ?=

.PHONY: help install system python jars stubs transcoder spark-archive up down status test test-unit demo bench lint fmt lock clean distclean

help:
	@echo "make demo        run the main job through Airflow, from MariaDB to Delta"
	@echo "make demo DEMO=vitess   the same job from a two-shard Vitess keyspace"
	@echo "make test        install what is missing, start services, run every test"
	@echo "make up | down   start / stop the local services (MariaDB, Kafka, Airflow; the MongoDB"
	@echo "                 test server too when connectors/ holds a MongoDB connector file)"
	@echo "make status      show the local services"
	@echo "make bench       run the benchmarks in bench/"
	@echo "make lint        ruff"
	@echo "make lock        re-resolve requirements.in into requirements.lock"

install: system python jars stubs transcoder spark-archive

system:
	@scripts/install_system.sh

python: system
	@scripts/install_python.sh

jars: system python
	@scripts/fetch_jars.sh

# Python gRPC stubs of Vitess's VStream API, generated from the protos of the Vitess jar.
stubs: python jars
	@scripts/vitess_stubs.sh

# The MongoDB connector's compiled renderer of change events (Rust, built with cargo).
transcoder: python
	@scripts/build_transcoder.sh

# A class-data-sharing archive of the Spark driver's classes (spark_jobs/driver_jvm.py):
# every Spark job and test session starts its JVM ~40% faster with it.
spark-archive: python jars
	@$(PY) -m spark_jobs.driver_jvm

up: install
	@$(SERVICES) up $(SERVICES_UP)

down:
	@if [ -x $(PY) ]; then $(SERVICES) down; else python3 -m scripts.services down; fi

status:
	@$(SERVICES) status

# Unit tests need no service; integration and e2e tests use the real MariaDB and Kafka
# (started here if not running, and stopped again afterwards if this run started them),
# Spark in local mode with Delta, and Airflow with a migrated SQLite metadata database.
# The tests run in lanes (scripts/test_lanes.py): those on Airflow's metadata database
# beside the rest, then the few that stop a service, alone.
test: install
	@$(SERVICES) run mariadb kafka airflow-db vitess -- $(PY) -m scripts.test_lanes $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; exit $$rc

test-unit: install
	@$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The main job through Airflow: MariaDB and Airflow standalone (Kafka too when
# connectors/demo.yaml sinks to it); the demo's streamer DAG captures a live workload, an
# ad-hoc snapshot goes through the REST API, the merge lands it in Delta, and each source
# table is printed next to its Delta table. Airflow keeps running afterwards (`make down`).
# `make demo DEMO=vitess` runs the same job on connectors/demo_vitess.yaml: the shop on a
# two-shard Vitess keyspace behind the VTGate double, beside the MariaDB demo.
DEMO ?= mysql
DEMO_KAFKA := $(shell grep -Eqs '^sink\.type: *kafka' connectors/demo.yaml && echo kafka)
DEMO_SERVICES_mysql := mariadb $(DEMO_KAFKA)
DEMO_SERVICES_vitess := mariadb vitess vtgate
demo: install
	@$(SERVICES) up $(DEMO_SERVICES_$(DEMO)) airflow
	@$(PY) -m demo.run --source $(DEMO)

bench: install
	@$(SERVICES) run mariadb kafka vitess -- $(PY) -m bench

lint: python
	@.venv/bin/ruff check .
	@.venv/bin/ruff format --check .

fmt: python
	@.venv/bin/ruff check --fix .
	@.venv/bin/ruff format .

lock:
	@.venv/bin/uv pip compile requirements.in --python-version 3.11 --quiet \
	    --custom-compile-command "make lock" -o requirements.lock

clean:
	rm -rf .pytest_cache .ruff_cache spark-warehouse metastore_db derby.log

# Stops the services and removes everything installed or generated in the tree.
distclean: down clean
	rm -rf .venv .jars .local cdc_core/connectors/vitess/generated
