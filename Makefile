# Two entry points, each doing its own setup on a fresh machine:
#   make reproduce   -- the main job: all four papers' comparisons (quick mode) into runs/reproduce
#   make test        -- the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup lint browser test fuzz reproduce bench figures drl gallery leaderboard docs rllib clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# CPU torch first, then everything else pinned to it (see constraints.txt).
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,drl,contrib,ray,docs,clients,viewer,video]"
	touch $(STAMP)

setup: $(STAMP)

# The linter first (pyflakes' rules over every Python folder, [tool.ruff] in pyproject.toml), then the tests.
lint: $(STAMP)
	$(BIN)/ruff check --quiet .

# Headless Chromium for the docs site's browser check (tests/project/test_site_browser.py): Debian's package,
# installed where it is missing and apt-get can (root, a package source); otherwise that test skips and says why.
browser:
	@command -v chromium >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends chromium) >/dev/null 2>&1 || \
		echo "chromium could not be installed: the browser test will skip"

# Two pytest workers taking whole files (a module's fixtures built once), the longest files first (tests/conftest.py).
test: lint browser
	$(BIN)/python -m pytest -n 2 --dist loadfile -q

# The fuzz suite of the tests with many more examples (random, not derandomised).
fuzz: $(STAMP)
	CLUSTERGYM_FUZZ_EXAMPLES=500 $(BIN)/python -m pytest -n 2 -q tests/cli/test_fuzz*.py

# RLlib's recipe (docs/recipes.md) in its own venv: ray[rllib] pins gymnasium 1.2.2, a downgrade the
# main venv does not take (about 270 MB more).
rllib:
	test -x .venv-rllib/bin/python || $(PYTHON) -m venv .venv-rllib
	.venv-rllib/bin/pip install -q torch==2.13.0
	.venv-rllib/bin/pip install -q -c constraints.txt -e ".[dev,rllib]"
	.venv-rllib/bin/python -m pytest -q tests/project/test_recipes.py -k rllib -rs

reproduce: $(STAMP)
	$(BIN)/clustergym reproduce all --quick --out runs/reproduce --overwrite

bench: $(STAMP)
	$(BIN)/clustergym bench

# The P1 figures docs/esdp.md shows: every agent on 5 instances of the paper scenario (scenario_seed
# 0..4, seed = instance), 2000 slots (Table 3's T), means with 95% bands over instances; the claims,
# sensitivity and true-means tables are printed. Measured: 21 minutes on 2 cores shared with other
# jobs (load average 7-13); about 2,000 s of run wall time in all, most of it ESDP's decisions.
figures: $(STAMP)
	$(BIN)/python -m clustergym.experiments.esdp --horizon 2000 --instances 5 --workers 2 \
		--out runs/p1-2000 --figures docs/figures

# The learned-scheduler benchmark docs/drl.md shows (clustergym drl): every learner of every env, 3 training
# seeds on the instance pool 1000-1099, evaluated on held-out instances beside the paper policies; resumable
# (finished cells in runs/drl are reused); writes runs/drl/table.md, the learning curves into docs/figures and
# the best learner per env into clustergym/learning/pretrained (sb3:pretrained/<EnvName>). About 45 min here.
drl: $(STAMP)
	$(BIN)/clustergym drl --out runs/drl --figures docs/figures --export-pretrained

# The docs gallery (docs/gallery.md): one episode-viewer frame per env and one comparison figure per paper
# (the paper's policy and its family's baselines on 5 instances, short horizons) into docs/figures/gallery.
# About 10 minutes on 2 shared cores.
gallery: $(STAMP)
	$(BIN)/python -m clustergym.experiments.gallery --out docs/figures/gallery

# The leaderboard (docs/leaderboard.md): every shipped agent of every env on held-out instances 0-14 at the envs'
# default horizons, normalised by each env's bound, into docs/data/leaderboard; each pretrained model's learning
# curve from a re-run of its training configuration (first 10,000 steps) into docs/leaderboard/curves. Resumable
# (runs/leaderboard/store); each section of the page gives its wall time.
leaderboard: $(STAMP)
	$(BIN)/python -m clustergym.experiments.leaderboard --instances 0-14 --curves-rerun 10000

# The docs site, offline, into site/ (open site/index.html): regenerate the reference pages from the
# code (docs/gen_pages.py), then build in strict mode (any warning, e.g. a broken link, fails).
docs: $(STAMP)
	$(BIN)/python docs/gen_pages.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) runs site build/docs-src
