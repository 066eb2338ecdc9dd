# Two entry points, each doing its own setup on a fresh machine:
#   make reproduce   -- the main job: the paper comparisons (quick mode) into runs/reproduce
#   make test        -- the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup test reproduce bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU torch first, then everything else pinned to it (see constraints.txt).
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,contrib]"
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

reproduce: $(STAMP)
	$(BIN)/clustergym reproduce esdp --quick --out runs/reproduce

bench: $(STAMP)
	$(BIN)/clustergym bench

clean:
	rm -rf $(VENV) runs
