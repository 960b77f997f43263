"""The model-merging baseline: task arithmetic over single-task specialists.

    theta_merged = theta_base + scale * sum_k w_k * (theta_k - theta_base)      (w_k = 1/K by default)

With scale 1 and equal weights this is the plain average of the specialists (Ilharco et al.'s task vectors
averaged). Floating-point tensors are merged in float32 and stored in the base model's dtype; other tensors (integer
buffers) are taken from the base. Full-weight model directories only (a LoRA checkpoint holds an adapter: merge it
into its base model first).

    python -m densecode.domains.multi.merge --base densecode-tiny --out runs/merged \
        runs/robotics/checkpoints/step-000040/model runs/code/checkpoints/step-000040/model
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from densecode.errors import DensecodeError


def _load(path: str | Path):
    from transformers import AutoModelForCausalLM

    from densecode.models import resolve_model_path

    p = Path(resolve_model_path(str(path)))  # densecode-tiny, a directory or a hub id
    if p.is_dir() and (p / "adapter_config.json").is_file():
        raise DensecodeError(f"{p} is a LoRA adapter; merging needs full weights (merge the adapter into its base "
                             "model with peft's merge_and_unload and save that)")
    try:
        return AutoModelForCausalLM.from_pretrained(str(p), torch_dtype="auto")
    except (OSError, ValueError) as exc:
        raise DensecodeError(f"cannot load model {p}: {str(exc).splitlines()[0]}") from None


def merge_task_vectors(base: str | Path, specialists: list[str | Path], out: str | Path | None = None, *,
                       weights: list[float] | None = None, scale: float = 1.0):
    """The merged model (a transformers model); saved with the base's tokenizer to `out` when given."""
    if not specialists:
        raise DensecodeError("merge: name at least one specialist model")
    weights = list(weights) if weights is not None else [1.0 / len(specialists)] * len(specialists)
    if len(weights) != len(specialists):
        raise DensecodeError(f"merge: {len(weights)} weights for {len(specialists)} specialists")
    base_model = _load(base)
    base_sd = {k: v.detach().clone() for k, v in base_model.state_dict().items()}
    delta = {k: torch.zeros_like(v, dtype=torch.float32) for k, v in base_sd.items() if v.is_floating_point()}
    for path, w in zip(specialists, weights):
        sd = _load(path).state_dict()  # one specialist in memory at a time
        if set(sd) != set(base_sd):
            raise DensecodeError(f"merge: {path} has other parameters than the base {base} (another architecture?)")
        for k in delta:
            if sd[k].shape != base_sd[k].shape:
                raise DensecodeError(f"merge: {path}: {k} has shape {tuple(sd[k].shape)}, the base "
                                     f"{tuple(base_sd[k].shape)}")
            delta[k] += float(w) * (sd[k].float() - base_sd[k].float())
    merged = {k: ((base_sd[k].float() + scale * delta[k]).to(base_sd[k].dtype) if k in delta else base_sd[k])
              for k in base_sd}
    base_model.load_state_dict(merged)
    if out is not None:
        from transformers import AutoTokenizer

        base_model.save_pretrained(str(out), safe_serialization=True)
        from densecode.models import resolve_model_path

        AutoTokenizer.from_pretrained(resolve_model_path(str(base))).save_pretrained(str(out))
    return base_model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specialists", nargs="+", help="model directories of the single-task specialists")
    ap.add_argument("--base", required=True, help="the model the specialists were fine-tuned from")
    ap.add_argument("--out", required=True, help="directory for the merged model")
    ap.add_argument("--weights", type=float, nargs="*", default=None, help="w_k per specialist (default 1/K each)")
    ap.add_argument("--scale", type=float, default=1.0, help="factor on the summed task vectors")
    args = ap.parse_args(argv)
    merge_task_vectors(args.base, args.specialists, args.out, weights=args.weights, scale=args.scale)
    print(f"merged {len(args.specialists)} specialists into {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
