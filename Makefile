# angelos: developer and CI entry points. `make test` is what .ci/run runs.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
.PHONY: bootstrap lint typecheck test demo

VENV := .venv/bin

bootstrap:
	@scripts/bootstrap

lint: bootstrap
	$(VENV)/ruff check .

typecheck: bootstrap
	$(VENV)/mypy

# Everything CI checks; starts and stops the real peers (Redis, Dovecot, SMTP sink) itself,
# one set per part of the suite (scripts/test-parts runs the parts side by side).
# pytest's exit 5 ("no tests ran") is non-zero, so it fails the target too.
test:
	@start=$$(date +%s%N); rc=0; \
	$(MAKE) --no-print-directory bootstrap lint typecheck \
	  && scripts/test-parts \
	  || rc=$$?; \
	end=$$(date +%s%N); \
	printf 'make test: %s in %d.%03d s\n' "$$([ $$rc = 0 ] && echo passed || echo "FAILED (exit $$rc)")" \
	  $$(( (end - start) / 1000000000 )) $$(( (end - start) / 1000000 % 1000 )); \
	exit $$rc

# A newcomer's walk-through: throwaway peers on loopback, then `angelos demo` with one send; the
# server's log goes to a file the demo names, so the terminal holds only the walk-through.
demo: bootstrap
	@echo "make demo: starting a throwaway Redis, Dovecot and SMTP server on loopback (a few seconds)"
	@ANGELOS_DEMO_SEND=1 scripts/test-services run -- $(VENV)/angelos demo
