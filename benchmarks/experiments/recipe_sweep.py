"""The recipe sweep (issue "RL that clearly learns"): one training run per arm on the VALIDATION split.

Each arm is `densecode train --domain D` with a few `--set` overrides (DOMAIN_ARMS below), seed 0, its held-out
eval on 300 validation tasks (never the test split: that is for the final numbers,
benchmarks/experiments/rl_seeds.py). The table gives, per arm, greedy and sampled (T=1.0) success before → after with the paired 95% interval of the change
over the 300 tasks (one seed: task noise only), the training rollouts' task success (first vs last 5 steps),
KL to the reference and entropy over the last 5 steps, and the run's wall time. Finished runs are reused; with
`--archive DIR` each finished run's result files (no weights) are archived in DIR and restored from there on a
machine without the run folders (an archive made with other overrides is refused).

    python -m benchmarks.experiments.recipe_sweep --parallel 2 --workdir runs/sweep           # every arm
    python -m benchmarks.experiments.recipe_sweep --arms rft-lr1e-4 outcome-p1 --workdir runs/sweep
    python -m benchmarks.experiments.recipe_sweep --domain codegen --parallel 2     # runs/recipe_sweep_codegen
    python -m benchmarks.experiments.recipe_sweep --arms neg0-lr6e-5 --archive benchmarks/results/runs/recipe_sweep-robotics
    python -m benchmarks.experiments.recipe_sweep --list
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

# The arms, as overrides of configs/robotics.yaml. Each spells out every setting it changes from the
# reference arm `gae` (the recipe before the sweep) so the arm means the same whatever the default is.
GAE = ["algo.ppo.credit=gae", "algo.ppo.samples_per_prompt=1", "train.batch_size=64", "train.lr=2e-5",
       "generation.top_p=0.95", "train.steps=40", "reward.weights.kl=0.2", "train.num_threads=1",
       "algo.skip_zero_advantage_rows=false"]
OUTCOME = ["algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4", "train.batch_size=16"]
# The validation winner (the `outcome-p1-kl0-neg0` arm below), the base of the later arms.
NEG0 = GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100", "generation.top_p=1.0", "reward.weights.kl=0",
                        "algo.ppo.negative_scale=0"]
RFT = ["algo.name=rft", "algo.rft.samples_per_prompt=4", "train.batch_size=16"]
GRPO = ["algo.name=grpo", "algo.grpo.group_size=4", "algo.grpo.num_iterations=1",
        "algo.grpo.temperature_schedule.stages=[1.0]", "algo.grpo.temperature_schedule.switch_steps=[]",
        "algo.skip_zero_advantage_rows=true"]
ARMS: dict[str, list[str]] = {
    "gae": GAE,
    "outcome-lr1e-4": GAE + OUTCOME + ["train.lr=1e-4"],
    "outcome-lr3e-5": GAE + OUTCOME + ["train.lr=3e-5"],
    "outcome-lr5e-5-frozen-emb": GAE + OUTCOME + ["train.lr=5e-5", "model.freeze_embeddings=true"],
    "outcome-lr3e-5-T0.7": GAE + OUTCOME + ["train.lr=3e-5", "generation.temperature=0.7"],
    "outcome-lr3e-5-100steps": GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100"],
    "outcome-lr3e-5-2epochs": GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100", "algo.ppo.epochs=2",
                                               "algo.early_stop_kl=0.02"],
    "outcome-lr3e-5-kl1.0": GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100", "reward.weights.kl=1.0"],
    "outcome-p1": GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100", "generation.top_p=1.0"],
    "outcome-p1-kl0": GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100", "generation.top_p=1.0",
                                       "reward.weights.kl=0"],
    "outcome-p1-k8": GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100", "generation.top_p=1.0",
                                      "algo.ppo.samples_per_prompt=8", "train.batch_size=8"],
    "outcome-p1-kl0-neg0.5": GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100", "generation.top_p=1.0",
                                              "reward.weights.kl=0", "algo.ppo.negative_scale=0.5"],
    "outcome-p1-kl0-neg0": GAE + OUTCOME + ["train.lr=3e-5", "train.steps=100", "generation.top_p=1.0",
                                            "reward.weights.kl=0", "algo.ppo.negative_scale=0"],
    # Larger steps on the neg0 settings: without the failures' push-down the entropy rise that collapsed
    # lr 1e-4 and 2 epochs (above) may not happen.
    "neg0-lr6e-5": NEG0 + ["train.lr=6e-5"],
    "neg0-lr1e-4": NEG0 + ["train.lr=1e-4"],
    "neg0-2epochs": NEG0 + ["algo.ppo.epochs=2", "algo.early_stop_kl=0.02"],
    # Twice the samples: does greedy follow the sampled gain given more updates? (eval every 20 steps: the curve)
    "neg0-200steps": NEG0 + ["train.steps=200"],
    # The update on signal rows only (algo.skip_zero_advantage_rows: the same update, ~6x less update time) buys
    # steps within the default's 12 minutes: does greedy keep rising past 200?
    "neg0-300steps": NEG0 + ["train.steps=300", "algo.skip_zero_advantage_rows=true"],
    # Credit estimators (issue "Dense credit that pays") on the neg0 settings: β = algo.ppo.dense_scale.
    "neg0-dense-b0.5": NEG0 + ["algo.ppo.credit=outcome+dense", "algo.ppo.dense_scale=0.5"],
    "neg0-local-b0.5": NEG0 + ["algo.ppo.credit=outcome+local", "algo.ppo.dense_scale=0.5"],
    # MicroCoder-GRPO's group advantage on the neg0 settings (groups of 4, one pass, fixed T=1.0): does the
    # alternative optimiser learn on the recipe, with failures pushed down (GRPO) or not (negative_scale 0)?
    "grpo-p1-kl0": NEG0 + GRPO,
    "grpo-p1-kl0-neg0": NEG0 + GRPO + ["algo.grpo.negative_scale=0"],
    # GRPO's group-normalised advantages came out smaller than PPO's batch-whitened ones (grad norm 0.16 vs 0.40 at
    # the same lr): the same step size needs ~2.5x the lr.
    "grpo-p1-kl0-neg0-lr8e-5": NEG0 + GRPO + ["algo.grpo.negative_scale=0", "train.lr=8e-5"],
    # The larger lr lost greedy success (KL 6.8 nats); more samples at lr 3e-5 instead, as PPO's greedy gain needed.
    "grpo-p1-kl0-neg0-200steps": NEG0 + GRPO + ["algo.grpo.negative_scale=0", "train.steps=200"],
    # The located penalty on a place/object name the instruction does not mention (reward component `grounding`,
    # densecode/domains/robotics_grounding.py), read by outcome+local credit on those tokens only: the diagnosed
    # cause of the greedy losses (the same program naming another room) gets its own credit.
    "neg0-grounding-b0.5": NEG0 + ["algo.ppo.credit=outcome+local", "algo.ppo.dense_scale=0.5",
                                   "reward.weights.grounding=1.0", "algo.skip_zero_advantage_rows=true"],
    "rft-p1-kl0": GAE + RFT + ["train.lr=3e-5", "train.steps=100", "generation.top_p=1.0", "reward.weights.kl=0"],
    "rft-lr1e-4": GAE + RFT + ["train.lr=1e-4"],
    "rft-lr1e-4-frozen-emb": GAE + RFT + ["train.lr=1e-4", "model.freeze_embeddings=true"],
}
# codegen and testgen: the robotics recipe carried over at the domains' sample budget (40 steps x 64 responses),
# against each domain's previous default (`gae`, spelled out as for robotics).
CODE_RECIPE = OUTCOME + ["train.lr=3e-5", "generation.top_p=1.0", "reward.weights.kl=0", "train.steps=40"]
CODE_GAE = ["algo.ppo.credit=gae", "algo.ppo.samples_per_prompt=1", "train.batch_size=64", "generation.top_p=0.95",
            "train.steps=40", "reward.weights.kl=0.1"]
# codegen's arms ran on configs/codegen-gae.yaml's values when that was codegen.yaml; these two are the settings
# the shipped codegen.yaml has changed since that CODE_GAE does not spell out.
CODEGEN_GAE = CODE_GAE + ["algo.ppo.negative_scale=1", "algo.skip_zero_advantage_rows=false"]
# The codegen default (configs/codegen.yaml) as an arm: the base of its credit-estimator arms.
CODEGEN_NEG0_200 = CODEGEN_GAE + CODE_RECIPE + ["algo.ppo.negative_scale=0", "train.steps=200",
                                                "algo.skip_zero_advantage_rows=true"]
# testgen's outcome recipe as an arm (`outcome-neg0`): the base of its lr and credit-estimator arms.
TESTGEN_NEG0 = CODE_GAE + CODE_RECIPE + ["algo.ppo.negative_scale=0"]
DOMAIN_ARMS: dict[str, dict[str, list[str]]] = {
    "robotics": ARMS,
    "codegen": {
        "gae": CODEGEN_GAE + ["train.lr=2e-5"],
        "outcome": CODEGEN_GAE + CODE_RECIPE + ["algo.ppo.negative_scale=1"],
        "outcome-neg0": CODEGEN_GAE + CODE_RECIPE + ["algo.ppo.negative_scale=0"],
        # Five times the samples (robotics' greedy gain needed 200 steps): does codegen's greedy follow?
        "outcome-neg0-200steps": CODEGEN_NEG0_200,
        "gae-200steps": CODEGEN_GAE + ["train.lr=2e-5", "train.steps=200"],
        # Credit estimators (issue "Dense credit that pays") on the codegen default (outcome-neg0-200steps): the
        # outcome plus the located findings (syntax, lint, the raising line), β = algo.ppo.dense_scale.
        "outcome-neg0-200steps-dense-b0.5": CODEGEN_NEG0_200 + ["algo.ppo.credit=outcome+dense",
                                                                "algo.ppo.dense_scale=0.5"],
        "outcome-neg0-200steps-local-b0.5": CODEGEN_NEG0_200 + ["algo.ppo.credit=outcome+local",
                                                                "algo.ppo.dense_scale=0.5"],
        # MicroCoder-GRPO's group advantage on the same settings (robotics' grpo-p1-kl0-neg0).
        "grpo-neg0-200steps": CODEGEN_GAE + CODE_RECIPE + ["train.steps=200", *GRPO, "algo.grpo.negative_scale=0"],
        # GRPO's greedy was flat at 200 steps while its sampled success rose: does it follow later, as PPO's did?
        "grpo-neg0-300steps": CODEGEN_GAE + CODE_RECIPE + ["train.steps=300", *GRPO, "algo.grpo.negative_scale=0"],
    },
    "testgen": {
        "gae": CODE_GAE + ["train.lr=1e-4"],
        "outcome": CODE_GAE + CODE_RECIPE + ["algo.ppo.negative_scale=1"],
        "outcome-neg0": TESTGEN_NEG0,
        "outcome-neg0-lr1e-4": TESTGEN_NEG0 + ["train.lr=1e-4"],
        # Credit estimators (issue "Dense credit that pays") on outcome-neg0: the outcome plus each assert's located
        # value (coverage and kill gains, the failing assert's penalty) and syntax errors, β = algo.ppo.dense_scale.
        "outcome-neg0-dense-b0.5": TESTGEN_NEG0 + ["algo.ppo.credit=outcome+dense", "algo.ppo.dense_scale=0.5"],
        "outcome-neg0-local-b0.5": TESTGEN_NEG0 + ["algo.ppo.credit=outcome+local", "algo.ppo.dense_scale=0.5"],
    },
}
EVAL = ["tasks.eval_split=validation", "train.eval_tasks=300", "train.eval_every=20", "train.save_every=20"]


def run_dir_done(run_dir: Path) -> bool:
    from densecode.rl.report import read_metrics

    cfg = run_dir / "config.yaml"
    if not cfg.is_file():
        return False
    import yaml

    steps = int((yaml.safe_load(cfg.read_text()) or {}).get("train", {}).get("steps", 0))
    _, evals = read_metrics(run_dir)
    return bool(evals) and max(r["step"] for r in evals) >= steps


SETTINGS_FILE = "recipe_sweep.json"


def overrides(arm: str, seed: int, domain: str = "robotics") -> list[str]:
    # The code domains' evals every 40 steps: start and end of the 40-step arms, a curve for the longer ones.
    evals = EVAL if domain == "robotics" else [*EVAL, "train.eval_every=40", "train.save_every=40"]
    return [*DOMAIN_ARMS[domain][arm], *evals, f"train.seed={seed}"]


def settings(arm: str, seed: int, domain: str = "robotics") -> dict:
    """What makes a run folder this arm's run (written into it, checked against an archive's)."""
    return {"domain": domain, "arm": arm, "overrides": overrides(arm, seed, domain)}


def command(arm: str, run_dir: Path, seed: int, domain: str = "robotics") -> list[str]:
    cmd = [str(Path(sys.executable).parent / "densecode"), "train", "--domain", domain, "--no-progress",
           "--output-dir", str(run_dir)]
    if (run_dir / "config.yaml").is_file():
        cmd += ["--resume", str(run_dir)]  # a killed run continues with its own config
    else:
        for item in overrides(arm, seed, domain):
            cmd += ["--set", item]
    return cmd


def row(arm: str, run_dir: Path) -> dict:
    from densecode.rl.report import eval_task_rows, window_means, paired_interval, read_metrics

    train, evals = read_metrics(run_dir)
    # Task success from the outcomes: the same 0/1 values as robotics' and codegen's headline metric, and success
    # rather than coverage for testgen.
    tasks = eval_task_rows(run_dir, values="success")
    out = {"arm": arm, "steps": train[-1]["step"] if train else 0,
           "wall_min": (train[-1].get("elapsed_s", 0.0) / 60) if train else 0.0}
    for p in ("greedy", "sampled"):
        steps = sorted(s for s, q in tasks if q == p)
        a, b = tasks[(steps[0], p)], tasks[(steps[-1], p)]
        mean, lo, hi = paired_interval(a, b)
        out[p] = {"before": sum(a) / len(a), "after": sum(b) / len(b), "gain": mean, "lo": lo, "hi": hi}
    for key, name in (("rollout/task_success", "rollout_success"), ("objective/kl", "kl"),
                      ("ppo/entropy", "entropy"), ("rft/entropy", "entropy"),
                      ("grpo/entropy", "entropy")):
        fl = window_means(train, key, 5)
        if fl is not None:
            out[name] = fl
    return out


def table(rows: list[dict]) -> str:
    lines = ["| arm | steps | greedy before → after | change [95%] | T=1.0 before → after | change [95%] | "
             "rollout success first 5 → last 5 | KL last 5 | entropy last 5 | wall |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g, s = r["greedy"], r["sampled"]
        rs = r.get("rollout_success", (float("nan"),) * 2)
        lines.append(
            f"| {r['arm']} | {r['steps']} | {g['before']:.3f} → {g['after']:.3f} | {g['gain']:+.3f} [{g['lo']:+.3f}, "
            f"{g['hi']:+.3f}] | {s['before']:.3f} → {s['after']:.3f} | {s['gain']:+.3f} [{s['lo']:+.3f}, "
            f"{s['hi']:+.3f}] | {rs[0]:.3f} → {rs[1]:.3f} | {r.get('kl', (0, float('nan')))[1]:.2f} | "
            f"{r.get('entropy', (0, float('nan')))[1]:.3f} | {r['wall_min']:.1f} min |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", default="robotics", choices=list(DOMAIN_ARMS))
    parser.add_argument("--arms", nargs="+", default=None, metavar="ARM", help="default: all of the domain's")
    parser.add_argument("--workdir", default=None, help="default: runs/recipe_sweep (robotics), runs/recipe_sweep_<domain>")
    parser.add_argument("--parallel", type=int, default=1, help="trainings at once (each uses ~1 core)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="print the arms and their overrides")
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--archive", default=None, metavar="DIR",
                        help="archive each finished run's result files (no weights) here, and restore runs from here "
                             "(e.g. benchmarks/results/runs/recipe_sweep-robotics, kept with the project)")
    args = parser.parse_args()
    arms = DOMAIN_ARMS[args.domain]
    if args.list:
        for name, sets in arms.items():
            print(f"{name}: " + " ".join(f"--set {s}" for s in sets))
        return 0
    args.arms = args.arms or list(arms)
    unknown = [a for a in args.arms if a not in arms]
    if unknown:
        parser.error(f"unknown {args.domain} arm(s) {', '.join(unknown)}; have: {', '.join(arms)}")
    workdir = Path(args.workdir or ("runs/recipe_sweep" if args.domain == "robotics" else
                                    f"runs/recipe_sweep_{args.domain}"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.archive:
        from densecode.eval.run_archive import restore_if_archived

        for arm in args.arms:
            if not run_dir_done(workdir / arm) and restore_if_archived(
                    Path(args.archive), workdir / arm, settings(arm, args.seed, args.domain), SETTINGS_FILE) is not None:
                print(f"{arm}: restored from {args.archive}", flush=True)
    pending = [a for a in args.arms if not run_dir_done(workdir / a)]
    running: list[tuple[subprocess.Popen, str]] = []
    while pending or running:
        while pending and len(running) < max(1, args.parallel):
            arm = pending.pop(0)
            cmd = command(arm, workdir / arm, args.seed, args.domain)
            print("$", " ".join(cmd), flush=True)
            (workdir / arm).mkdir(parents=True, exist_ok=True)
            (workdir / arm / SETTINGS_FILE).write_text(json.dumps(settings(arm, args.seed, args.domain), indent=1))
            log = open(workdir / f"{arm}.log", "a")  # noqa: SIM115 - the child keeps it open
            running.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), arm))
        time.sleep(2)
        for proc, arm in list(running):
            if proc.poll() is not None:
                running.remove((proc, arm))
                if proc.returncode != 0:
                    print(f"{arm} failed (exit {proc.returncode}); log: {workdir / arm}.log")
                    return 1
    if args.archive:
        from densecode.eval.run_archive import archive_finished
        from densecode.rl.report import read_metrics

        for arm in args.arms:
            run_dir = workdir / arm
            if not (run_dir / SETTINGS_FILE).is_file():  # a run of an older version of this script
                (run_dir / SETTINGS_FILE).write_text(json.dumps(settings(arm, args.seed, args.domain), indent=1))
            last = max(r["step"] for r in read_metrics(run_dir)[1])
            if archive_finished(run_dir, Path(args.archive), last) is not None:
                print(f"archived {run_dir} in {args.archive}", flush=True)
    rows = [row(a, workdir / a) for a in args.arms]
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    from benchmarks.common import exit_with

    exit_with(main)
