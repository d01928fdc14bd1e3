# Entry points (README "Quickstart"): `make lab` opens your own copies of the lessons, `make test` runs every check
# CI runs. Both create .venv when it is missing and install only when the requirements changed (tools/install_env.py
# keeps a fingerprint of them in the stamp files, so a git checkout that only touches the files costs nothing).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Which PyTorch: auto (CPU-only on Linux without an NVIDIA driver), cpu or default. See tools/install_env.py.
TORCH ?= auto
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg
# Two pytest workers (pytest-xdist). --dist loadfile keeps each test file in one worker: each notebook's cells in
# order in one kernel (nbval), and the whole browser session. --no-loadscope-reorder hands files out in collection
# order, where tests/browser comes first, so the browser session (the longest file) starts at once in one worker
# while the other takes the unit tests and nbval, instead of starting last.
WORKERS ?= 2
PARALLEL := -n $(WORKERS) --dist loadfile --no-loadscope-reorder
# more pytest options, e.g. make test PYTEST_ARGS='-m "not browser" --durations=20'
PYTEST_ARGS ?=

# The web book (book/build.py): every edition of the executed lessons as HTML in build/book/html, checked.
BOOK := $(BIN)/python -m book.build --out build/book

.PHONY: lab student test test-fast test-browser test-numerics book notebooks editions clean-venv

$(VENV)/.requirements.stamp: requirements.txt pyproject.toml tools/install_env.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python tools/install_env.py --torch $(TORCH) --stamp $@ requirements.txt

$(VENV)/.dev.stamp: $(VENV)/.requirements.stamp requirements-dev.txt
	$(BIN)/python tools/install_env.py --stamp $@ requirements-dev.txt

# JupyterLab refuses to run as root without --allow-root (containers, CI machines); add it only there.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)

# Which lessons: the English ones (default), or a Chinese edition: make lab EDITION=zh-CN (简体) / EDITION=zh-TW
# (繁體), whose lessons are notebooks/EDITION/ and whose copies go to student/EDITION/.
EDITION ?=
ifneq ($(filter-out zh-CN zh-TW,$(EDITION)),)
$(error EDITION must be zh-CN or zh-TW (or unset for English), got "$(EDITION)")
endif
LESSON_DIR := notebooks$(if $(EDITION),/$(EDITION))
STUDENT_DIR := student$(if $(EDITION),/$(EDITION))
EDITION_OPTION := $(if $(EDITION),--edition $(EDITION) )

lab: $(VENV)/.requirements.stamp student
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/$(STUDENT_DIR) $(ALLOW_ROOT)

# Your copies of the lessons, in student/ (student/EDITION/): solutions replaced by "# YOUR CODE HERE". Only
# missing copies are written (a new lesson after a git pull, say); a copy already there is your work and is never
# overwritten.
STUDENT_MISSING = $(filter-out $(wildcard $(STUDENT_DIR)/*.ipynb),$(patsubst $(LESSON_DIR)/%,$(STUDENT_DIR)/%,$(wildcard $(LESSON_DIR)/*.ipynb)))

student: $(VENV)/.requirements.stamp
	@missing="$(notdir $(STUDENT_MISSING))"; \
	if [ -n "$$missing" ]; then $(BIN)/python -m attention_lab.teaching.classroom student $(EDITION_OPTION)--out $(STUDENT_DIR)/ $$missing; \
	else echo "$(STUDENT_DIR)/ has a copy of every lesson (yours: never overwritten)"; fi

# The book is built before pytest (warnings are errors); tests/test_book_*.py and tests/browser check that build.
# Every lesson of every edition runs under nbval; the browser opens the first lesson of each edition and one heavy
# lesson (the lessons marked browser_all are left to make test-browser).
test: $(VENV)/.dev.stamp
	$(BIN)/ruff check .
	$(BOOK)
	$(BIN)/python -m pytest $(NBVAL) $(PARALLEL) -m "not browser_all" $(PYTEST_ARGS) tests notebooks

# A contributor's edit-run loop: the unit tests and the English lessons under nbval, without the browser, the
# Chinese editions, the book and the tests marked slow (each starts a kernel, a Python or a Sphinx build of its own:
# student copies run top to bottom, command lines, benchmark scripts; make test runs them).
test-fast: $(VENV)/.dev.stamp
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(NBVAL) $(PARALLEL) -m "not browser and not slow" $(PYTEST_ARGS) tests $(wildcard notebooks/*.ipynb)

# Every lesson of every edition's first, opened and run in JupyterLab in headless Chromium, and the web book of
# every edition (CI runs it after make test). One worker: it is one browser session.
test-browser: $(VENV)/.dev.stamp
	$(BIN)/python -m pytest $(PYTEST_ARGS) tests/browser/test_lessons_in_browser.py tests/browser/test_web_book.py

# Read the lessons on the web: build/book/html/index.html (README "The web book"). It never executes a lesson.
book: $(VENV)/.dev.stamp
	$(BOOK)

# Every lesson again under two other numeric code paths (ATen's AVX2 kernels, as on a CPU without AVX-512; ATen's
# plain kernels with MKL's compatible path and one thread), comparing what nbval compares: an output that another
# CPU would print differently fails, naming the lesson, the cell and the path (tools/check_numerics.py; CI runs it
# after make test). One lesson: make test-numerics NB=notebooks/10_efficient_attention.ipynb
test-numerics: $(VENV)/.dev.stamp
	$(BIN)/python tools/check_numerics.py --jobs $(WORKERS) $(or $(NB),notebooks/*.ipynb)

# Maintainers: re-execute lessons in place (all, or NB="notebooks/02_*.ipynb") after changing them.
notebooks: $(VENV)/.dev.stamp
	$(BIN)/python tools/run_notebooks.py $(or $(NB),notebooks/*.ipynb)

# Translators and maintainers: bring the catalogs in line with the English (locale/, attention_lab/locale/), then
# write and execute the Chinese editions of every lesson that has a catalog (or LESSONS="00 03").
editions: $(VENV)/.dev.stamp
	$(BIN)/python tools/editions.py update
	$(BIN)/python tools/editions.py build $(LESSONS)

clean-venv:
	rm -rf $(VENV)
