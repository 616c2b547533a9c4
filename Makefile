# Tasks for working on jurybox (CONTRIBUTING.md). Run inside the virtual environment.
.PHONY: check test test-fast lint format types imports docs docs-serve

check:  ## ruff, the formatter's check, the commit hooks, mypy, the import contract, the docs
	bash .ci/check

test:  ## the whole suite: the fast tier on two workers, then the real models, Ray and the services
	python -m pytest -q -n 2 -m "not models and not vllm" --durations=20
	python -m pytest -q -m "models or vllm" --durations=40

test-fast:  ## everything but the real models and vLLM, on two workers: ~80 s on 2 cores
	python -m pytest -q -n 2 -m "not models and not vllm"

lint:
	ruff check .

format:  ## the formatter (ruff format); `make check` fails on unformatted code
	ruff format .

types:
	mypy

imports:
	PYTHONPATH=. lint-imports

docs:  ## the documentation site into site/ (strict: a broken link or reference fails)
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict

docs-serve:  ## the documentation site at http://127.0.0.1:8001, rebuilt on every change
	NO_MKDOCS_2_WARNING=1 mkdocs serve -a 127.0.0.1:8001
