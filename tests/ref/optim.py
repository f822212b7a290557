"""Fixtures for tests/test_optim.c: torch.optim updates over 20 steps with recorded gradients, and
clip_grad_norm_. For each case K: K.p0.<i> initial params, K.g.<i> gradients [steps, ...], K.p.<i> params after
every step [steps, ...]."""
import os

import torch
from fixture import FIXTURES, save_safetensors

STEPS = 20
gen = torch.Generator().manual_seed(3)
shapes = [(4, 3), (3,), (2, 2, 5)]
t = {}


def case(key, make_opt, clip=None):
    params = [torch.nn.Parameter(torch.rand(*s, generator=gen) * 2 - 1) for s in shapes]
    grads = [torch.rand(STEPS, *s, generator=gen) * 2 - 1 for s in shapes]
    for i, p in enumerate(params):
        t[f"{key}.p0.{i}"] = p.detach().clone().numpy()
        t[f"{key}.g.{i}"] = grads[i].numpy()
    opt = make_opt(params)
    traj = [[] for _ in params]
    for step in range(STEPS):
        for i, p in enumerate(params):
            p.grad = grads[i][step].clone()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        for i, p in enumerate(params):
            traj[i].append(p.detach().clone())
    for i in range(len(params)):
        t[f"{key}.p.{i}"] = torch.stack(traj[i]).numpy()


O = torch.optim
case("sgd", lambda p: O.SGD(p, lr=0.1))
case("sgd_momentum_wd", lambda p: O.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01))
case("sgd_nesterov", lambda p: O.SGD(p, lr=0.05, momentum=0.9, nesterov=True))
case("adam", lambda p: O.Adam(p, lr=1e-2))
case("adam_wd", lambda p: O.Adam(p, lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1))
case("adamw", lambda p: O.AdamW(p, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1))
case("adadelta", lambda p: O.Adadelta(p, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.01))
case("adam_clip", lambda p: O.Adam(p, lr=1e-2), clip=0.5)
save_safetensors(os.path.join(FIXTURES, "optim.safetensors"), t, {"generator": "tests/ref/optim.py"})
print("wrote optim.safetensors", len(t))
