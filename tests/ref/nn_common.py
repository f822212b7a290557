"""Module fixtures for the nn tests: like Fixture.case, plus a module's parameters and their gradients.

A module case K stores, besides Fixture's "K.in.<i>", "K.out", "K.gout", "K.grad.<i>":
  "K.param.<state_dict name>"  every parameter (randomised first, so no bias is trivially zero)
  "K.pgrad.<state_dict name>"  its gradient after out.backward(gout)
The C side loads the parameters into a qkv_params by name and compares output, input and parameter gradients."""
import torch

from fixture import Fixture  # noqa: F401  (re-exported for the nn_* scripts)


def randomise(fx, module, scale=0.5):
    """Uniform(-scale, scale) for every parameter; LayerNorm weights around 1."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            r = fx.rand(*p.shape) * scale
            if isinstance(module.get_submodule(name.rsplit(".", 1)[0]) if "." in name else module,
                          torch.nn.LayerNorm) and name.endswith("weight"):
                r = r + 1.0
            p.copy_(r)


def module_case(fx, key, module, fn, inputs, grad=None, extra=None):
    """fn(*leaves) -> output, using `module`; extra(leaves) -> dict of more tensors to store (computed after)."""
    module.zero_grad()
    for name, p in module.named_parameters():
        fx.tensors[f"{key}.param.{name}"] = p.detach().numpy().copy()
    leaves = []
    for i, x in enumerate(inputs):
        x = x.detach().clone()
        if x.dtype == torch.float32 and (grad is None or grad[i]):
            x.requires_grad_(True)
        leaves.append(x)
    out = fn(*leaves)
    gout = fx.rand(*out.shape)
    out.backward(gout)  # always: the parameters need gradients even when no input does
    for i, x in enumerate(leaves):
        fx.tensors[f"{key}.in.{i}"] = x.detach().numpy()
        if x.requires_grad:
            fx.tensors[f"{key}.grad.{i}"] = x.grad.numpy()
    fx.tensors[f"{key}.out"] = out.detach().numpy()
    fx.tensors[f"{key}.gout"] = gout.numpy()
    for name, p in module.named_parameters():
        if p.grad is None:
            raise RuntimeError(f"{key}: parameter {name} got no gradient")
        fx.tensors[f"{key}.pgrad.{name}"] = p.grad.numpy().copy()
    if extra:
        with torch.no_grad():
            for k, v in extra().items():
                fx.tensors[f"{key}.{k}"] = v.detach().numpy().copy()
