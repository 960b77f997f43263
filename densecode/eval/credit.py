"""Credit-assignment diagnostics of a PPO run, from its saved rollouts (rollouts.jsonl): why dense rewards do or do
not beat the same rewards on the last token.

Each number answers one question about how the reward reaches the policy gradient:
- explained variance of the value function by token position (`explained_variance_by_position`): does the critic
  predict the return early in a response, or only near its end? EV = 1 - Var(R - V) / Var(R) over the tokens of a
  position bucket (relative position in the response; the last token on its own), R the GAE return the value loss
  fits and V the prediction at rollout time.
- advantage sign agreement with the offending token (`sign_agreement`): the tokens a penalty component marks (its
  diagnostics with a negative value: the syntax error, the lint violation, the line that raised in the simulator)
  should get a negative advantage. The share of marked tokens whose advantage is negative, beside the share among
  unmarked tokens (the base rate), raw and after whitening.
- outcome agreement (`outcome_agreement`): does a token's advantage carry its response's outcome (better or worse
  than its batch), and where in the response? Sparse rewards reach early tokens only through the critic.
- the effect of advantage whitening (`whitening_effect`): whitening subtracts the batch mean; when the raw
  advantages are mostly of one sign that flips many tokens' signs, penalised tokens included.
- the KL share of the return (`kl_share`): how much of a response's summed reward is the KL penalty rather than
  the task components (share of absolute parts, and share of the variance across responses).

All functions take rollout records as written by the trainer (densecode.rewards.explain.rollout_records, with the
`algo` arrays: values, returns, advantages) and return JSON-safe dicts; `diagnose` runs all of them per logged step
and over the whole run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from densecode.errors import DensecodeError

LAST = "last token"


def _algo(rec: dict, name: str) -> np.ndarray | None:
    arr = (rec.get("algo") or {}).get(name)
    return None if arr is None else np.asarray(arr, dtype=np.float64)


def raw_advantages(rec: dict) -> np.ndarray | None:
    """GAE advantages before whitening: returns - values (PPO); a run without a value model has only the
    advantages its loss used (GRPO: the group-normalised sequence advantage on every token)."""
    returns, values = _algo(rec, "returns"), _algo(rec, "values")
    if returns is not None and values is not None:
        return returns - values
    return _algo(rec, "advantages")


def require_algo_arrays(records: Sequence[dict], where: str = "rollouts") -> None:
    if not records:
        raise DensecodeError(f"{where}: no rollout records (set train.rollouts_every > 0 and train again)")
    if not any("algo" in r for r in records):
        raise DensecodeError(f"{where}: the rollout records carry no value/return/advantage arrays ('algo'): they "
                             "were written by a trainer older than the credit diagnostics; retrain the run")


def bucket_of(position: int, length: int, n_buckets: int) -> str:
    """The position bucket of token `position` in a `length`-token response: the last token apart (where a
    sparse reward lands), the others by relative position in `n_buckets` equal slices."""
    if position == length - 1:
        return LAST
    rel = position / max(length - 1, 1)
    k = min(int(rel * n_buckets), n_buckets - 1)
    return f"{100 * k // n_buckets}-{100 * (k + 1) // n_buckets}%"


def bucket_names(n_buckets: int) -> list[str]:
    return [f"{100 * k // n_buckets}-{100 * (k + 1) // n_buckets}%" for k in range(n_buckets)] + [LAST]


def explained_variance(values: np.ndarray, returns: np.ndarray) -> float | None:
    """1 - Var(R - V) / Var(R) (None when the returns do not vary)."""
    if returns.size < 2:
        return None
    var_r = float(np.var(returns))
    if var_r <= 0:
        return None
    return float(1.0 - np.var(returns - values) / var_r)


# A bucket whose returns barely vary (sd under this share of all tokens' returns sd) has nothing to explain: its EV
# is a ratio of two near-zero variances (dense rewards leave the last token a near-constant return).
CONSTANT_RETURNS_SHARE = 0.05


def explained_variance_by_position(records: Iterable[dict], n_buckets: int = 5) -> dict[str, dict]:
    """{bucket: {"n_tokens", "ev", "returns_sd"}} pooled over the records' tokens (buckets: see `bucket_of`); "ev" is
    None, and "constant_returns" True, where the returns hardly vary (CONSTANT_RETURNS_SHARE)."""
    vals: dict[str, list[float]] = defaultdict(list)
    rets: dict[str, list[float]] = defaultdict(list)
    for rec in records:
        v, r = _algo(rec, "values"), _algo(rec, "returns")
        if v is None or r is None:
            continue
        n = len(r)
        for t in range(n):
            b = bucket_of(t, n, n_buckets)
            vals[b].append(v[t])
            rets[b].append(r[t])
    pooled_sd = float(np.std(np.concatenate([np.asarray(r) for r in rets.values()]))) if rets else 0.0
    out = {}
    for b in bucket_names(n_buckets):
        r = np.asarray(rets[b])
        sd = float(np.std(r)) if r.size else None
        constant = sd is not None and sd < CONSTANT_RETURNS_SHARE * pooled_sd
        out[b] = {"n_tokens": int(r.size), "returns_sd": sd, "constant_returns": bool(constant),
                  "ev": None if (constant or not r.size) else explained_variance(np.asarray(vals[b]), r)}
    return out


def offending_tokens(rec: dict) -> dict[str, np.ndarray]:
    """{component: boolean mask of the tokens its negative diagnostics mark} (components that marked any)."""
    n = len(rec.get("total") or [])
    out: dict[str, np.ndarray] = {}
    for comp, diags in (rec.get("diagnostics") or {}).items():
        mask = np.zeros(n, dtype=bool)
        for d in diags or []:
            toks, value = d.get("tokens"), d.get("value")
            if toks and value is not None and float(value) < 0:
                lo, hi = max(0, int(toks[0])), min(n, int(toks[1]))
                mask[lo:hi] = True
        if mask.any():
            out[comp] = mask
    return out


def whiten(x: np.ndarray) -> np.ndarray:
    """(x - mean) / std over all of x (the PPO trainer's batch whitening, densecode.rl.ppo.whiten)."""
    if x.size < 2:
        return x - x.mean() if x.size else x
    return (x - x.mean()) / np.sqrt(np.var(x, ddof=1) + 1e-8)


def _by_step(records: Iterable[dict]) -> dict[int | None, list[dict]]:
    out: dict[int | None, list[dict]] = defaultdict(list)
    for rec in records:
        out[rec.get("step")].append(rec)
    return dict(out)


def _whitened_per_step(records: Sequence[dict]) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """(record, raw advantages, advantages whitened over the record's batch) for records that have them; a batch
    is one step of one run (records pooled from several runs carry their run's name in `run`)."""
    batches: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        batches[(str(rec.get("run")), rec.get("step"))].append(rec)
    out = []
    for recs in batches.values():
        raws = [(r, raw_advantages(r)) for r in recs]
        raws = [(r, a) for r, a in raws if a is not None and len(a) == len(r.get("total") or [])]
        if not raws:
            continue
        flat = np.concatenate([a for _, a in raws])
        white = whiten(flat)
        i = 0
        for r, a in raws:
            out.append((r, a, white[i:i + len(a)]))
            i += len(a)
    return out


def _share(x: np.ndarray) -> float | None:
    return float(np.mean(x)) if x.size else None


def sign_agreement(records: Sequence[dict]) -> dict[str, dict]:
    """Per penalty component: among the tokens it marks, the share with a negative advantage (raw and whitened),
    and the same share among the tokens no component marks (the base rate to compare with)."""
    marked_raw: dict[str, list[np.ndarray]] = defaultdict(list)
    marked_white: dict[str, list[np.ndarray]] = defaultdict(list)
    clean_raw, clean_white = [], []
    for rec, raw, white in _whitened_per_step(records):
        masks = offending_tokens(rec)
        any_mask = np.zeros(len(raw), dtype=bool)
        for comp, mask in masks.items():
            marked_raw[comp].append(raw[mask] < 0)
            marked_white[comp].append(white[mask] < 0)
            any_mask |= mask
        clean_raw.append(raw[~any_mask] < 0)
        clean_white.append(white[~any_mask] < 0)
    out = {}
    for comp in sorted(marked_raw):
        r, w = np.concatenate(marked_raw[comp]), np.concatenate(marked_white[comp])
        out[comp] = {"n_tokens": int(r.size), "negative_raw": _share(r), "negative_whitened": _share(w)}
    cr = np.concatenate(clean_raw) if clean_raw else np.zeros(0, bool)
    cw = np.concatenate(clean_white) if clean_white else np.zeros(0, bool)
    out["(unmarked tokens)"] = {"n_tokens": int(cr.size), "negative_raw": _share(cr), "negative_whitened": _share(cw)}
    return out


def whitening_effect(records: Sequence[dict]) -> dict:
    """The raw advantages' mean and sd, the share of tokens whose sign whitening flips, and the share of
    marked (offending) tokens that go from a negative raw advantage to a positive whitened one."""
    raws, flips, penal_flips = [], [], []
    for rec, raw, white in _whitened_per_step(records):
        raws.append(raw)
        flips.append(np.sign(raw) != np.sign(white))
        masks = offending_tokens(rec)
        if masks:
            marked = np.logical_or.reduce(list(masks.values()))
            penal_flips.append((raw[marked] < 0) & (white[marked] > 0))
    if not raws:
        return {"n_tokens": 0, "raw_mean": None, "raw_sd": None, "sign_flip_share": None,
                "offending_negative_to_positive": None}
    flat = np.concatenate(raws)
    pf = np.concatenate(penal_flips) if penal_flips else np.zeros(0, bool)
    return {"n_tokens": int(flat.size), "raw_mean": float(flat.mean()), "raw_sd": float(flat.std()),
            "sign_flip_share": _share(np.concatenate(flips)), "offending_negative_to_positive": _share(pf)}


def outcome_agreement(records: Sequence[dict], n_buckets: int = 5) -> dict:
    """Does each token's advantage carry its response's outcome? Per position bucket (see `bucket_of`), the share
    of tokens whose whitened advantage has the sign of (outcome - the batch's mean outcome): a response that did
    better than its batch should be pushed up at its tokens, a worse one down. The outcome is the one GRPO uses
    (the components' verdicts: densecode.rewards.explain.record_outcome); responses at the batch mean and
    records without an outcome are left out. Also the correlation, over responses, of the response's mean
    whitened advantage with its outcome. Under sparse rewards the outcome reaches early tokens only through the
    critic; under dense rewards part of it is paid along the response."""
    from densecode.rewards.explain import record_outcome

    agree: dict[str, list[np.ndarray]] = defaultdict(list)
    means, outcomes = [], []
    batches: dict[tuple, list[tuple[dict, np.ndarray, float]]] = defaultdict(list)
    for rec, _raw, white in _whitened_per_step(records):
        o = record_outcome(rec)
        if o is not None and white.size:
            batches[(str(rec.get("run")), rec.get("step"))].append((rec, white, o))
    for batch in batches.values():
        mean_o = float(np.mean([o for _, _, o in batch]))
        for _rec, white, o in batch:
            means.append(float(white.mean()))
            outcomes.append(o)
            if np.isclose(o, mean_o):
                continue
            want = 1.0 if o > mean_o else -1.0
            n = len(white)
            for t in range(n):
                agree[bucket_of(t, n, n_buckets)].append(np.sign(white[t]) == want)
    by_bucket = {b: {"n_tokens": len(agree[b]), "agree": _share(np.asarray(agree[b], dtype=bool))}
                 for b in bucket_names(n_buckets)}
    corr = None
    if len(outcomes) > 2 and np.std(outcomes) > 0 and np.std(means) > 0:
        corr = float(np.corrcoef(means, outcomes)[0, 1])
    return {"n_responses": len(outcomes), "by_bucket": by_bucket, "mean_advantage_outcome_corr": corr}


def kl_share(records: Sequence[dict]) -> dict:
    """The KL term's part of the summed reward: mean |KL part| / mean sum over components of |part| (a part =
    weight x the component's summed raw values over the response), and Var(KL part) / Var(summed reward) across
    responses. None when the run has no KL component."""
    kl_parts, abs_parts, totals = [], [], []
    for rec in records:
        comps, weights = rec.get("components") or {}, rec.get("weights") or {}
        if "kl" not in comps:
            continue
        parts = {c: float(weights.get(c, 0.0)) * float(np.sum(v)) for c, v in comps.items()}
        kl_parts.append(parts["kl"])
        abs_parts.append(sum(abs(p) for p in parts.values()))
        totals.append(float(np.sum(rec.get("total") or [0.0])))
    if not kl_parts:
        return {"n_responses": 0, "abs_share": None, "variance_share": None, "kl_part_mean": None}
    kl, tot = np.asarray(kl_parts), np.asarray(totals)
    denom = float(np.mean(abs_parts))
    var_tot = float(np.var(tot))
    return {"n_responses": len(kl_parts), "abs_share": float(np.mean(np.abs(kl)) / denom) if denom > 0 else None,
            "variance_share": float(np.var(kl) / var_tot) if var_tot > 0 else None,
            "kl_part_mean": float(kl.mean())}


def diagnose(records: Sequence[dict], n_buckets: int = 5) -> dict:
    """Every diagnostic over the whole run and per logged step (JSON-safe)."""
    require_algo_arrays(records)

    def all_of(recs):
        return {"explained_variance": explained_variance_by_position(recs, n_buckets),
                "sign_agreement": sign_agreement(recs), "outcome_agreement": outcome_agreement(recs, n_buckets),
                "whitening": whitening_effect(recs),
                "kl_share": kl_share(recs), "n_responses": len(recs)}

    steps = _by_step(records)
    return {"mode": sorted({str(r.get("mode")) for r in records}), "buckets": bucket_names(n_buckets),
            "overall": all_of(records),
            "per_step": {str(s): all_of(recs) for s, recs in sorted(steps.items(), key=lambda kv: kv[0] or 0)}}


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def diagnosis_markdown(diag: dict, title: str = "") -> str:
    """The diagnostics as markdown tables (overall, then the explained variance per step)."""
    o = diag["overall"]
    lines = [f"### {title or 'credit diagnostics'} (reward mode: {', '.join(diag['mode'])}; "
             f"{o['n_responses']} logged responses)", "",
             "Explained variance of the value function by token position (relative position; the last token apart):",
             "", "| bucket | tokens | returns sd | EV |", "|---|---|---|---|"]
    for b in diag["buckets"]:
        e = o["explained_variance"][b]
        ev = "– (returns about constant)" if e.get("constant_returns") else _fmt(e["ev"])
        lines.append(f"| {b} | {e['n_tokens']} | {_fmt(e.get('returns_sd'))} | {ev} |")
    lines += ["", "Advantage sign at the tokens a penalty component marks (share negative; unmarked = base rate):", "",
              "| component | tokens | negative (raw) | negative (whitened) |", "|---|---|---|---|"]
    for comp, s in o["sign_agreement"].items():
        lines.append(f"| {comp} | {s['n_tokens']} | {_fmt(s['negative_raw'])} | {_fmt(s['negative_whitened'])} |")
    oa = o.get("outcome_agreement")
    if oa and oa["n_responses"]:
        lines += ["", "Advantage sign against the response's outcome (share of tokens whose whitened advantage has the "
                  "sign of outcome − batch mean; " f"{oa['n_responses']} responses; correlation of a response's mean "
                  f"advantage with its outcome {_fmt(oa['mean_advantage_outcome_corr'])}):", "",
                  "| " + " | ".join(diag["buckets"]) + " |", "|---" * len(diag["buckets"]) + "|",
                  "| " + " | ".join(_fmt(oa["by_bucket"][b]["agree"]) for b in diag["buckets"]) + " |"]
    w, k = o["whitening"], o["kl_share"]
    lines += ["", f"Whitening: raw advantage mean {_fmt(w['raw_mean'], '+.3f')} (sd {_fmt(w['raw_sd'])}); "
              f"signs flipped {_fmt(w['sign_flip_share'])} of tokens; offending tokens turned from negative to "
              f"positive {_fmt(w['offending_negative_to_positive'])}.",
              f"KL share of the return: {_fmt(k['abs_share'])} of the absolute parts, {_fmt(k['variance_share'])} "
              f"of the variance across responses (mean KL part {_fmt(k['kl_part_mean'], '+.4f')}).", "",
              "Explained variance per logged step:", "",
              "| step | " + " | ".join(diag["buckets"]) + " |", "|---" * (1 + len(diag["buckets"])) + "|"]
    for step, d in diag["per_step"].items():
        lines.append(f"| {step} | " + " | ".join(_fmt(d["explained_variance"][b]["ev"]) for b in diag["buckets"])
                     + " |")
    return "\n".join(lines)
