"""Fixtures of the Python package's tests: SmolLM2 (BATON_SMOLLM2, else
the cached file) loaded once, and the `baton` binary (BATON_BIN) for
side-by-side checks."""

import os
import pathlib

import pytest

import baton

REPO = pathlib.Path(__file__).resolve().parents[3]


def smollm2_path() -> str:
    path = os.environ.get("BATON_SMOLLM2") or os.path.expanduser(
        "~/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    if not os.path.isfile(path):
        pytest.fail(f"no SmolLM2 at {path} (scripts/fetch-smollm2.sh)")
    return path


@pytest.fixture(scope="session")
def model_path() -> str:
    return smollm2_path()


@pytest.fixture(scope="session")
def llm(model_path):
    with baton.Llama(model_path, n_ctx=512, n_threads=2, verbose=False) as model:
        yield model


@pytest.fixture(scope="session")
def baton_bin() -> str:
    path = os.environ.get("BATON_BIN") or str(REPO / "target" / "release" / "baton")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no baton binary at {path} (cargo build --release, or BATON_BIN)")
    return path
