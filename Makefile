# Two entry points (README "Quickstart"): `make lab` opens the lessons, `make test` runs every check CI runs.
# Both create .venv when it is missing and reinstall only when a requirements file or pyproject.toml changed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg

.PHONY: lab test notebooks clean-venv

$(VENV)/.requirements.stamp: requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -r requirements.txt
	@touch $@

$(VENV)/.dev.stamp: $(VENV)/.requirements.stamp requirements-dev.txt
	$(BIN)/python -m pip install --disable-pip-version-check -r requirements-dev.txt
	@touch $@

# JupyterLab refuses to run as root without --allow-root (containers, CI machines); add it only there.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)

lab: $(VENV)/.requirements.stamp
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks $(ALLOW_ROOT)

test: $(VENV)/.dev.stamp
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(NBVAL) tests notebooks

# Maintainers: re-execute lessons in place (all, or NB="notebooks/02_*.ipynb") after changing them.
notebooks: $(VENV)/.dev.stamp
	$(BIN)/python tools/run_notebooks.py $(or $(NB),notebooks/*.ipynb)

clean-venv:
	rm -rf $(VENV)
