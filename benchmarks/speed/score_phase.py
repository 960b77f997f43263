"""The PPO step's score phase on the default robotics run (configs/robotics.yaml), and what bounds it.

Runs `--steps` training steps of the default robotics recipe (separate critic, KL term on, so the
critic and the reference each score the rollout) with the trainer itself, and prints the trainer's
per-phase times: this process's CPU time (all its threads; the sandboxed sim runs are other
processes) and wall time, and the score phase's share of the step. On a shared machine the CPU-time
split is the stable one; the wall-time split moves with everything else running.

Baselines, on each step's own batch, measured right after that step (CPU time, no grad):
- padded: the critic and the reference over the batch's padded layout [left-padded prompt |
  right-padded response], in chunks of generation.batch_size rows, as the score-once path did
  before densecode.rl.packed_scoring (the critic's whole LM forward, the reference's logits at
  every position). "Share before" puts that CPU time in place of the packed passes' in the step.
- incremental critic: the critic run alongside sampling with a KV cache (the prompts, then one
  token per step for the rows still alive), the alternative to a separate pass.
- packed: the same batch through densecode.rl.packed_scoring again (what the step used).

    .venv/bin/python -m benchmarks.speed.score_phase [--steps 3] [--set train.batch_size=16 ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import checkout_first, quiet_offline_cpu

quiet_offline_cpu()
checkout_first()

import torch  # noqa: E402


def cpu_time(fn, *args, **kwargs) -> float:
    start = time.process_time()
    fn(*args, **kwargs)
    return time.process_time() - start


def padded_passes(trainer, batch) -> None:
    """The critic and the reference over the padded layout, as before packed scoring."""
    pv, ref = trainer.unwrapped, trainer.reference
    R = batch.response_ids.shape[1]
    chunk = max(1, trainer.cfg.generation.batch_size)
    with torch.no_grad():
        for start in range(0, batch.size, chunk):
            sl = slice(start, start + chunk)
            args = (batch.input_ids[sl], batch.attention_mask[sl], batch.position_ids[sl], batch.response_ids[sl])
            if pv.critic is not None:
                hidden = pv.critic(input_ids=args[0], attention_mask=args[1], position_ids=args[2],
                                   output_hidden_states=True, use_cache=False).hidden_states[-1]
                pv.value_head(hidden[:, -R - 1: -1, :])
            if ref is not None:
                ref.logprobs(pv.policy, *args, temperature=batch.temperature)


def packed_passes(trainer, batch, with_reference: bool = True) -> None:
    from densecode.rl.packed_scoring import score_packed

    pv = trainer.unwrapped
    model, context = None, None
    if with_reference and trainer.reference is not None:
        model, context = trainer.reference.scoring_model(pv.policy)
    score_packed(batch, max_rows=max(1, trainer.cfg.generation.batch_size), value_head=pv.value_head,
                 critic=pv.critic, reference=model, reference_context=context)


@torch.inference_mode()
def incremental_critic(trainer, batch) -> None:
    """The critic's hidden states computed token by token with a KV cache, as it could run alongside sampling."""
    from densecode.generation import _empty_cache, _select_cache

    critic = trainer.unwrapped.critic
    R = batch.response_ids.shape[1]
    Lq = batch.input_ids.shape[1] - R
    lengths = batch.response_mask.sum(-1).long()
    mask, pos = batch.attention_mask[:, :Lq], batch.position_ids[:, :Lq]
    out = critic(input_ids=batch.input_ids[:, :Lq], attention_mask=mask, position_ids=pos,
                 past_key_values=_empty_cache(), use_cache=True, output_hidden_states=True)
    past, alive = out.past_key_values, torch.arange(batch.size)
    for j in range(R - 1):  # the state before response token j + 1
        keep = (lengths[alive] > j + 1).nonzero().squeeze(-1)
        if len(keep) == 0:
            break
        if len(keep) < len(alive):
            past = _select_cache(past, keep)
            mask, pos, alive = mask.index_select(0, keep), pos.index_select(0, keep), alive[keep]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], -1)
        pos = pos[:, -1:] + 1
        out = critic(input_ids=batch.response_ids[alive, j:j + 1], attention_mask=mask, position_ids=pos,
                     past_key_values=past, use_cache=True, output_hidden_states=True)
        past = out.past_key_values


def from_runs(run_dirs: list[Path]) -> int:
    """The score phase's share of the step (CPU and wall) over finished runs' logged steps."""
    cpu, wall = [], []
    for d in run_dirs:
        path = d / "metrics.jsonl"
        if not path.is_file():
            print(f"error: {path} is missing: pass run folders of `densecode train`", file=sys.stderr)
            return 2
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            # Step 1 (the first) pays one-time costs; a resumed run's repeated steps count once each time.
            if rec.get("kind") == "train" and rec.get("step", 0) > 1 and rec.get("time/step_cpu_s"):
                cpu.append(rec["time/score_cpu_s"] / rec["time/step_cpu_s"])
                wall.append(rec["time/score_s"] / rec["time/step_s"])
    if not cpu:
        print("error: no logged training steps after the first in those runs", file=sys.stderr)
        return 2

    def q(xs, f):
        return 100 * statistics.quantiles(xs, n=20)[f] if len(xs) > 1 else 100 * xs[0]

    print(f"score-phase share over {len(cpu)} steps of {len(run_dirs)} run(s): CPU median "
          f"{100 * statistics.median(cpu):.1f}% (5-95%: {q(cpu, 0):.1f}-{q(cpu, 18):.1f}%), wall median "
          f"{100 * statistics.median(wall):.1f}% ({q(wall, 0):.1f}-{q(wall, 18):.1f}%)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="training steps (the first is not dropped: no warm-up cost)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="config overrides on configs/robotics.yaml")
    ap.add_argument("--json", default=None, help="write figure records here (run_all sets DENSECODE_BENCH_JSON)")
    ap.add_argument("--from-runs", nargs="+", default=None, metavar="RUN_DIR",
                    help="train nothing: the score phase's share in these finished runs' metrics.jsonl, every step "
                         "but the first (e.g. the dense-vs-sparse runs: many steps of the default recipe)")
    args = ap.parse_args(argv)
    if args.from_runs:
        return from_runs([Path(d) for d in args.from_runs])

    from densecode.training import build_trainer
    from densecode.config import load_config, resolve_config_path
    from densecode.eval.bench_records import emit, figure

    out_dir = tempfile.mkdtemp(prefix="score-phase-")
    cfg = load_config(resolve_config_path("robotics"), ["train.eval_every=0", "train.save_every=0",
                                                        f"train.output_dir={out_dir}", *args.overrides])
    trainer = build_trainer(cfg, Path(out_dir), progress=False)
    if cfg.train.num_threads > 0:
        torch.set_num_threads(cfg.train.num_threads)
    print(f"configs/robotics.yaml: {cfg.train.batch_size} prompts, value_model {cfg.model.value_model}, "
          f"reference {'on' if trainer.reference is not None else 'off'}, score_pass {cfg.algo.score_pass}, "
          f"torch threads {torch.get_num_threads()}")
    phases = ("generate", "score", "reward", "update")
    rows = []
    for step in range(args.steps):
        st = trainer.train_step(step)
        batch = trainer._last_batch
        row = {f"{p}_cpu": st[f"time/{p}_cpu_s"] for p in phases} | {f"{p}_wall": st[f"time/{p}_s"] for p in phases}
        row |= {"step_cpu": st["time/step_cpu_s"], "step_wall": st["time/step_s"],
                "positions": st.get("score/positions_per_model", float("nan")),
                "padded": st.get("score/padded_positions", float("nan")),
                "packed_pass": cpu_time(packed_passes, trainer, batch),
                "padded_pass": cpu_time(padded_passes, trainer, batch)}
        has_critic = trainer.unwrapped.critic is not None
        row["packed_critic"] = (cpu_time(packed_passes, trainer, batch, with_reference=False)
                                if has_critic else float("nan"))
        row["incremental_critic"] = (cpu_time(incremental_critic, trainer, batch)
                                     if has_critic else float("nan"))
        # The step with the padded passes in place of the packed ones (their CPU time, same batch).
        delta = row["padded_pass"] - row["packed_pass"]
        row["share_before"] = (row["score_cpu"] + delta) / (row["step_cpu"] + delta)
        row["share"] = row["score_cpu"] / row["step_cpu"]
        row["share_wall"] = row["score_wall"] / row["step_wall"]
        rows.append(row)
        print(f"step {step + 1}: CPU s " + " ".join(f"{p} {row[p + '_cpu']:.2f}" for p in phases)
              + f" step {row['step_cpu']:.2f} | score share {100 * row['share']:.1f}% CPU, "
              f"{100 * row['share_wall']:.1f}% wall (step {row['step_wall']:.1f} s) | positions per model "
              f"{row['positions']:.0f} of {row['padded']:.0f} padded", flush=True)
        print(f"        same batch, CPU s: critic+reference packed {row['packed_pass']:.2f}, padded "
              f"{row['padded_pass']:.2f}; critic alone packed {row['packed_critic']:.2f}, incrementally with a "
              f"KV cache {row['incremental_critic']:.2f}", flush=True)

    def med(key):
        return statistics.median(r[key] for r in rows)

    print(f"\nmedian over {len(rows)} steps (CPU time of this process):")
    print(f"  score phase {med('score_cpu'):.2f} s of a {med('step_cpu'):.2f} s step: {100 * med('share'):.1f}% "
          f"(goal <= 10%); with the padded passes {100 * med('share_before'):.1f}%; wall-clock share "
          f"{100 * med('share_wall'):.1f}%")
    print("  step split: " + ", ".join(f"{p} {100 * med(p + '_cpu') / med('step_cpu'):.0f}%" for p in phases))
    print(f"  critic+reference: packed {med('packed_pass'):.2f} s vs padded {med('padded_pass'):.2f} s "
          f"({med('padded_pass') / med('packed_pass'):.2f}x); the critic alone packed {med('packed_critic'):.2f} s, "
          f"incrementally beside sampling {med('incremental_critic'):.2f} s")
    records = [
        figure("robotics PPO score-phase share of the step (CPU time; separate critic + reference)",
               100 * med("share"), "%", baseline="padded critic + reference passes (previous score-once)",
               baseline_value=100 * med("share_before"), note="goal <= 10%"),
        figure("robotics PPO score-phase share of the step (wall time; separate critic + reference)",
               100 * med("share_wall"), "%", note="goal <= 10%; wall time moves with the machine's load"),
        figure("robotics PPO critic + reference scoring, CPU s per step", med("packed_pass"), "s",
               baseline="padded layout, full logits", baseline_value=med("padded_pass"),
               ratio=med("padded_pass") / med("packed_pass"), note="ratio = speed-up"),
    ]
    if rows and rows[0]["incremental_critic"] == rows[0]["incremental_critic"]:
        records.append(figure("robotics PPO critic values, packed pass, CPU s per step",
                              med("packed_critic"), "s", baseline="critic with a KV cache beside sampling",
                              baseline_value=med("incremental_critic"),
                              ratio=med("incremental_critic") / med("packed_critic"), note="ratio = speed-up"))
    emit(records, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
