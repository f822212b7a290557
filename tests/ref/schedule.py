"""Fixtures for tests/test_schedule.c: learning rates from torch.optim.lr_scheduler (and the formulas of HF's
warmup schedules, written as torch LambdaLR) for steps 0..T, as float64 stored in float32."""
import math
import os

import numpy as np
import torch
from fixture import FIXTURES, save_safetensors

T, W, BASE = 100, 10, 0.5


def run(make_sched):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=BASE)
    sched = make_sched(opt)
    lrs = []
    for _ in range(T + 1):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return np.array(lrs, dtype=np.float32)


S = torch.optim.lr_scheduler
t = {
    "constant": run(lambda o: S.LambdaLR(o, lambda s: 1.0)),
    "cosine": run(lambda o: S.CosineAnnealingLR(o, T_max=T, eta_min=0.1 * BASE)),
    "linear": run(lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=T)),
    # HF get_linear_schedule_with_warmup / get_cosine_schedule_with_warmup, as LambdaLR
    "warmup_linear": run(lambda o: S.LambdaLR(o, lambda s: s / max(1, W) if s < W else max(0.0, (T - s) / max(1, T - W)))),
    "warmup_cosine": run(lambda o: S.LambdaLR(o, lambda s: s / max(1, W) if s < W else
                                              0.5 * (1 + math.cos(math.pi * (s - W) / (T - W))))),
    "noam": run(lambda o: S.LambdaLR(o, lambda s: 64 ** -0.5 * min(max(s, 1) ** -0.5, max(s, 1) * W ** -1.5) / 1.0)),
}
save_safetensors(os.path.join(FIXTURES, "schedule.safetensors"), t, {"generator": "tests/ref/schedule.py",
                                                                      "T": str(T), "W": str(W), "base": str(BASE)})
print("wrote schedule.safetensors")
