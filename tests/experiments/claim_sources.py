"""Claim-row test helpers shared by the experiments' claims tests: workdirs written from synthetic records
and the rows the claims job builds from them."""
import json

from experiments.claims import job as claims
from experiments.core.workdir import jsonable


def write_workdir(path, records, config=None):
  path.mkdir(parents=True, exist_ok=True)
  (path / "results.jsonl").write_text("".join(json.dumps(jsonable(r)) + "\n" for r in records))
  if config is not None:
    (path / "config.json").write_text(json.dumps(jsonable(config)))
  return path

def flip_records(relu, attn, *, eps=0.3, n_top=26, task="mnist", attacks=("fgsm", "pgd", "mim"), extra=None,
                  converged=None):
  """Flip-rate records: relu[i] / attn[i] flips of n_top (an int or per-seed list) at seed i."""
  out = []
  for seed, (a, b) in enumerate(zip(relu, attn)):
    top = n_top[seed] if isinstance(n_top, (list, tuple)) else n_top
    for model, flips in (("relu", a), ("mlp_attn", b)):
      for attack in attacks:
        r = dict(task=task, model=model, width=1024, seed=seed, adversarial_training=False, attack=attack,
                 eps=eps, n_flipped=flips, n_top=top, flip_rate=flips / top, n_train=256,
                 converged=True if converged is None else converged(seed, model))
        r.update(extra or {})
        out.append(r)
  return out

def claim_rows_of(tmp_path, name, records, config=None, claim_id=None):
  source = claims.load_source(write_workdir(tmp_path / name, records, config))
  rows = claims.build_rows([source], str(tmp_path), include_not_run=False)
  return [r for r in rows if claim_id is None or r["claim_id"] == claim_id]

def main_row(rows, claim_id):
  """The claim's main row: no variant, and among its measurement choices the primary one."""
  found = [r for r in rows if r["claim_id"] == claim_id and not r["variant"] and r.get("primary", True)]
  assert len(found) == 1, [r["claim_id"] for r in rows]
  return found[0]
