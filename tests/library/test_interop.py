"""minitrans.interop.torch without PyTorch, and its answers to bad arguments."""

import importlib
import sys

import pytest

from minitrans.model.config import ModelConfig
from minitrans.model.transformer import Transformer
from tests.library.conftest import assert_names


def test_importing_the_torch_bridge_without_torch_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # "import torch" now fails as if absent
    monkeypatch.delitem(sys.modules, "minitrans.interop.torch", raising=False)
    with pytest.raises(ImportError, match=r'pip install "minitrans\[torch\]"'):
        importlib.import_module("minitrans.interop.torch")


def test_the_interop_package_itself_needs_no_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.delitem(sys.modules, "minitrans.interop", raising=False)
    importlib.import_module("minitrans.interop")


@pytest.fixture
def bridge():
    pytest.importorskip("torch", reason="PyTorch is not installed: pip install \".[torch]\"")
    return importlib.import_module("minitrans.interop.torch")


def tiny(**options):
    return ModelConfig(
        **{**dict(vocab_size=9, d_model=8, h=2, N=1, d_ff=16, dropout=0.0, max_len=8), **options}
    )


def test_to_torch_refuses_what_is_not_a_model(bridge):
    with pytest.raises(TypeError) as info:
        bridge.to_torch("a model")
    assert_names(info, "model", "Transformer", "str")


def test_from_torch_refuses_a_plain_torch_module(bridge):
    import torch

    with pytest.raises(TypeError) as info:
        bridge.from_torch(torch.nn.Linear(2, 2))
    assert_names(info, "torch_model", "TorchTransformer", "Linear")


def test_from_torch_refuses_a_model_of_another_config(bridge):
    torch_model = bridge.to_torch(Transformer(tiny()))
    with pytest.raises(ValueError) as info:
        bridge.from_torch(torch_model, Transformer(tiny(d_ff=32)))
    assert_names(info, "torch_model", "d_ff=16", "d_ff=32")


def test_an_encoder_decoder_model_needs_a_torch_transformer(bridge):
    lm = bridge.TorchLanguageModel(tiny(decoder_only=True))
    with pytest.raises(TypeError) as info:
        bridge.parameter_links(Transformer(tiny()), lm)
    assert_names(info, "torch_model", "TorchTransformer", "TorchLanguageModel")


def test_torch_modules_refuse_the_wrong_kind_of_config(bridge):
    with pytest.raises(ValueError, match="config"):
        bridge.TorchTransformer(tiny(decoder_only=True))
    with pytest.raises(ValueError, match="config"):
        bridge.TorchLanguageModel(tiny())
