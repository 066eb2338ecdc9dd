# Two entry points, each doing its own setup on a fresh machine:
#   make reproduce   -- the main job: all four papers' comparisons (quick mode) into runs/reproduce
#   make test        -- the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup test reproduce bench figures clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# CPU torch first, then everything else pinned to it (see constraints.txt).
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,contrib]"
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

reproduce: $(STAMP)
	$(BIN)/clustergym reproduce all --quick --out runs/reproduce

bench: $(STAMP)
	$(BIN)/clustergym bench

# The figures and table the README shows (P1, 8000 slots, 3 seeds; about 20 minutes on 2 cores).
figures: $(STAMP)
	$(BIN)/clustergym run clustergym/MultiServerChannel-v0 --agents esdp,hauf,lcf,lwtf,random \
		--seeds 0,1,2 --horizon 8000 --workers 2 --out runs/p1-8000
	mkdir -p docs/figures
	cp runs/p1-8000/avg_reward.png docs/figures/p1_avg_reward.png
	cp runs/p1-8000/cumulative_regret.png docs/figures/p1_cumulative_regret.png

clean:
	rm -rf $(VENV) runs
