import json
import shutil

import pytest
import torch

from densecode import models
from densecode.cli import main
from densecode.config import LoraConfig, ModelConfig
from densecode.errors import DensecodeError
from densecode.models import load_model_and_tokenizer, resolve_model_path


def test_loads_local_dir_ready_for_batched_generation(tiny_model_dir):
    model, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    assert tok.padding_side == "left"
    assert tok.pad_token_id is not None
    assert model.config.pad_token_id == tok.pad_token_id
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32  # auto on CPU
    model, _ = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)), for_training=True)
    assert model.training


def test_explicit_dtype(tiny_model_dir):
    model, _ = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir), dtype="bfloat16"))
    assert next(model.parameters()).dtype == torch.bfloat16
    with pytest.raises(DensecodeError, match="model.dtype"):
        load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir), dtype="int3"))


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(DensecodeError, match="does not exist"):
        resolve_model_path(str(tmp_path / "nope"))
    with pytest.raises(DensecodeError, match="does not exist"):
        resolve_model_path("./runs/a/b/c")


def test_embedded_model_missing_says_build_model(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "ASSETS_DIR", tmp_path)
    with pytest.raises(DensecodeError, match="densecode build-model"):
        resolve_model_path("densecode-tiny")
    (tmp_path / "densecode-tiny").mkdir()
    (tmp_path / "densecode-tiny" / "config.json").write_text("{}")
    assert resolve_model_path("densecode-tiny") == str(tmp_path / "densecode-tiny")


def test_dir_without_config_is_rejected(tmp_path):
    with pytest.raises(DensecodeError, match="no config.json"):
        load_model_and_tokenizer(ModelConfig(name_or_path=str(tmp_path)))


def test_encoder_checkpoint_is_not_a_causal_lm(tmp_path):
    from transformers import BertConfig

    cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    cfg.architectures = ["BertForMaskedLM"]
    cfg.save_pretrained(tmp_path)
    with pytest.raises(DensecodeError, match="not a causal language model"):
        load_model_and_tokenizer(ModelConfig(name_or_path=str(tmp_path)))
    # Even without an architectures entry, a BERT that is not a decoder is refused.
    data = json.loads((tmp_path / "config.json").read_text())
    data.pop("architectures")
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(DensecodeError, match="encoder"):
        load_model_and_tokenizer(ModelConfig(name_or_path=str(tmp_path)))


def test_tokenizer_without_eos_or_pad_is_rejected(tiny_model_dir, tmp_path):
    target = tmp_path / "no-special"
    shutil.copytree(tiny_model_dir, target)
    cfg_path = target / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    for key in ("eos_token", "pad_token", "bos_token", "unk_token"):
        cfg[key] = None
    cfg_path.write_text(json.dumps(cfg))
    (target / "special_tokens_map.json").write_text("{}")
    with pytest.raises(DensecodeError, match="neither an EOS nor a pad token"):
        load_model_and_tokenizer(ModelConfig(name_or_path=str(target)))


def test_hub_id_offline_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DensecodeError, match="not a local directory"):
        load_model_and_tokenizer(ModelConfig(name_or_path="densecode-test-org/no-such-model"))


def test_cli_exit_code_2_without_traceback(tmp_path, capsys):
    prompts = tmp_path / "p.txt"
    prompts.write_text("def f():\n")
    code = main(["generate", "--model", str(tmp_path / "missing"), "--prompts", str(prompts),
                 "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == 2
    assert "does not exist" in err and "Traceback" not in err
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    code = main(["generate", "--model", str(tmp_path / "bert"), "--prompts", str(prompts),
                 "--out", str(tmp_path / "o.jsonl")])
    assert code == 2
    assert "not a causal language model" in capsys.readouterr().err


def test_lora_wraps_gpt2_attention(tiny_model_dir):
    lora = LoraConfig(enabled=True, r=4, alpha=8, dropout=0.0, target_modules=["c_attn"])
    model, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)), lora, for_training=True)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    assert 0 < trainable < total
    assert any("lora_A" in name for name, _ in model.named_parameters())
    ids = tok(["def f():\n"], return_tensors="pt")
    out = model(**ids, labels=ids["input_ids"])
    out.loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if "lora_B" in n]
    assert grads and all(g is not None for g in grads)


def test_lora_unknown_target_lists_candidates(tiny_model_dir):
    lora = LoraConfig(enabled=True, target_modules=["q_proj", "v_proj"])
    with pytest.raises(DensecodeError, match="c_attn"):
        load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)), lora)


def test_alias_loader_gets_the_same_preparation(tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    calls = {}

    def loader(model_cfg, *, device, dtype):
        calls["dtype"] = dtype
        tok = AutoTokenizer.from_pretrained(tiny_model_dir)
        tok.padding_side = "right"
        return AutoModelForCausalLM.from_pretrained(tiny_model_dir), tok

    monkeypatch.setitem(models.MODEL_ALIASES, "tiny-alias", loader)
    _model, tok = load_model_and_tokenizer(ModelConfig(name_or_path="tiny-alias"))
    assert calls["dtype"] == torch.float32
    assert tok.padding_side == "left"
