"""Synthetic certification records shared by the certification experiment and claim-row tests."""





def cert_record(alpha, eps, clean, pgd, rigorous, krylov, n=100, dataset="cifar10", rigorous_k=None):
  """A certify record with per-image flags: the first k images certified, the first clean·n correct."""
  k = int(round(rigorous * n)) if rigorous_k is None else rigorous_k
  flags = lambda m: [1] * m + [0] * (n - m)  # noqa: E731
  return dict(dataset=dataset, attention_bound=alpha, kind="certify", eps=eps, layer=-1, n_test=n, n_train=900,
              clean_accuracy=clean, pgd_accuracy=pgd, certified_rigorous=k / n, certified_accuracy=krylov,
              certified_naive=0.0, certified_fine=rigorous, certified_joint=krylov, certified_tsuzuku=rigorous,
              pgd_violations=0, seconds_per_sample=0.05, pgd_seconds_per_sample=0.01,
              fine_tighter_fraction=1.0, fine_gain_median=2.0, naive_over_fine_median=2.0, joint_tighter_fraction=1.0,
              joint_gain_median=1.1, key_gap_max=1e-6, jacobian_gap_max=1e-6,
              certified_rigorous_images=flags(k), certified_krylov_images=flags(int(round(krylov * n))),
              correct_images=flags(int(round(clean * n))), pgd_robust_images=flags(int(round(pgd * n))))

def selection_record(alpha, eps, dataset="cifar10"):
  return dict(dataset=dataset, attention_bound=alpha, kind="selection", eps=eps, layer=-1, n_validation=100,
              validation_fraction=0.1, candidates=[
                  dict(attention_bound=a, validation_certified_rigorous=0.3 if a == alpha else 0.1,
                       validation_certified_krylov=0.32, validation_clean_accuracy=0.33) for a in (0.0625, 1.0)])
