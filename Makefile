# Bolide: `make run` starts the broker on the embedded default store, `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV := $(BIN)/uv

.PHONY: run test lint bench bench-broker fuzz clean venv interop-deps

# The suite starts hundreds of Python processes: each keeps the bytecode it compiles, so that
# the next need not compile pyspark, pandas, grpc or bolide again (PYTHONDONTWRITEBYTECODE in
# the environment would have every one of them compile its imports from source).
unexport PYTHONDONTWRITEBYTECODE

venv: $(STAMP)

# uv (from PyPI, into the venv) installs the dependencies: several times faster than pip on a
# machine with an empty cache. The project is rebuilt whenever its C sources change.
$(UV):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv

$(STAMP): pyproject.toml setup.py $(wildcard src/bolide/store/*.c src/bolide/store/*.h src/bolide/protocol/*.c) | $(UV)
	$(UV) pip install --quiet --python $(BIN)/python --reinstall-package bolide -e '.[dev,spark]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/bolide start --store ./store

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy --ignore-missing-imports --follow-imports=silent --disallow-untyped-defs \
		--disallow-incomplete-defs src/bolide/client src/bolide/broker/proxy src/bolide/broker/pop.py \
		src/bolide/broker/processors/pop.py src/bolide/broker/processors/assignment.py src/bolide/broker/namesrv_route.py \
		src/bolide/protocol/pop_info.py src/bolide/broker/auth src/bolide/broker/processors/auth_admin.py \
		src/bolide/broker/replicas src/bolide/broker/processors/replicas.py src/bolide/store/broker_identity.py \
		src/bolide/protocol/bodies/auth.py src/bolide/protocol/headers/auth.py \
		src/bolide/broker/metrics src/bolide/metrics src/bolide/broker/timer_takeover.py src/bolide/store/timer_checkpoint.py \
		src/bolide/broker/pop_takeover.py src/bolide/store/pop_revive_log.py \
		src/bolide/store/epoch_file.py src/bolide/store/controller_mode.py src/bolide/broker/ha/autoswitch \
		src/bolide/broker/admin_create.py src/bolide/broker/processors/admin_lists.py \
		src/bolide/broker/static_topics.py src/bolide/protocol/bodies/static_topic.py \
		src/bolide/broker/static_rewrite.py src/bolide/broker/static_forward.py \
		src/bolide/broker/processors/group_admin.py src/bolide/broker/processors/consumer_status.py \
		src/bolide/broker/processors/read_mode.py src/bolide/broker/processors/rocksdb_admin.py \
		src/bolide/broker/cold_data.py src/bolide/broker/processors/cold_data.py src/bolide/cli/admin_cold_data.py \
		src/bolide/broker/processors/broker_ops.py src/bolide/store/timer_metrics.py src/bolide/cli/admin_ops.py \
		src/bolide/common/waiting.py src/bolide/broker/loop_service.py \
		src/bolide/store/offset_map.py src/bolide/store/compaction_files.py src/bolide/store/compaction_log.py \
		src/bolide/store/compaction.py src/bolide/broker/topic_attributes.py \
		src/bolide/store/verify_compaction.py src/bolide/store/repair_compaction.py src/bolide/broker/ha/compaction_heads.py src/bolide/broker/ha/links.py \
		src/bolide/protocol/headers/controller.py src/bolide/protocol/bodies/controller.py \
		src/bolide/controller src/bolide/cli/admin_controller.py src/bolide/cli/controller_seed.py \
		src/bolide/testing/controller.py \
		src/bolide/namesrv/controller.py src/bolide/common/config_file.py \
		src/bolide/protocol/java_order.py \
		src/bolide/protocol/static_topic_wrapper.py src/bolide/protocol/static_topic_checks.py \
		src/bolide/protocol/static_topic_plan.py src/bolide/cli/admin_static.py \
		src/bolide/broker/acting_master.py src/bolide/broker/escape.py src/bolide/broker/processors/acting.py src/bolide/broker/pre_online.py \
		src/bolide/broker/strict_locks.py src/bolide/broker/processors/lock.py \
		src/bolide/namesrv/acting.py src/bolide/protocol/haproxy.py src/bolide/remoting/listener.py src/bolide/testing/proxy_forwarder.py \
		src/bolide/remoting/selfsigned.py src/bolide/remoting/tls.py \
		src/bolide/testing/pyvenv.py src/bolide/testing/cppclient.py src/bolide/testing/pyclient5.py

# Real Apache RocketMQ (namesrv, broker, mqadmin) for tests/interop: the jars come from Maven
# Central into interop/.m2 the first time, then from that cache. Without java/javac/mvn this
# only warns and the interop tests are skipped; with CI set it fails.
# The Node.js client (ali-ons) is installed by npm ci into interop/.cache/node-client, likewise,
# and the RocketMQ 5 Python client (gRPC) and the C++ client (the `rocketmq` wheel) by uv (pip
# without it) into the venvs interop/.cache/python5-client and interop/.cache/cpp-client.
# The four run side by side (bolide.testing.prepare), and need only the standard library, so
# `make test` runs them while the venv is being installed.
interop-deps: | $(UV)
	PYTHONPATH=src $(BIN)/python -m bolide.testing.prepare

# The suite runs on TEST_WORKERS processes (pytest-xdist); each test module stays on one worker,
# and the Spark tests share one (tests/conftest.py). Three on two cores: many tests wait on
# JVMs, child processes and the network, so a third keeps the cores busy (about 10 % faster
# than two). TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 3
# The venv and lint, and the interop clients, are prepared side by side (output kept per target).
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target lint interop-deps
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# Coverage-guided fuzzing of the wire and record decoders, FUZZ_SECONDS per target; the corpus
# grows in fuzz-corpus/, inputs that fail are saved in fuzz-findings/.
FUZZ_SECONDS ?= 300
fuzz: $(STAMP)
	mkdir -p fuzz-findings
	for t in $$($(BIN)/python -m bolide.testing.fuzz --list); do \
		$(BIN)/python -m bolide.testing.fuzz $$t -max_total_time=$(FUZZ_SECONDS) \
			-artifact_prefix=fuzz-findings/$$t- fuzz-corpus/$$t || exit 1; \
	done

bench: $(STAMP)
	$(BIN)/bolide bench store

bench-broker: $(STAMP)
	$(BIN)/bolide bench broker

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache
