"""Helpers for the PyTorch reference scripts: run an op in torch, record inputs, output, upstream gradient and
input gradients, and write them as a safetensors file (no dependency beyond torch and numpy).

Run scripts with Debian's interpreter: /usr/bin/python3 tests/ref/<script>.py (writes tests/fixtures/)."""
import json
import os
import struct

import numpy as np
import torch

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")


def save_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (float32 or int32)."""
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        dtype = {np.dtype("float32"): "F32", np.dtype("int32"): "I32", np.dtype("int64"): "I64"}[arr.dtype]
        raw = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class Fixture:
    """Collects cases; each case runs fn(*inputs) in torch (float64 math is NOT used: float32 like qkv)."""

    def __init__(self, name, seed=0):
        self.name = name
        self.tensors = {}
        self.gen = torch.Generator().manual_seed(seed)

    def rand(self, *shape, lo=-1.0, hi=1.0):
        return torch.rand(tuple(shape), generator=self.gen) * (hi - lo) + lo

    def randint(self, high, *shape, low=0):
        return torch.randint(low, high, tuple(shape), generator=self.gen, dtype=torch.int32)

    def case(self, key, fn, inputs, grad=None):
        """inputs: list of tensors; float ones get gradients unless grad[i] is False."""
        leaves = []
        for i, x in enumerate(inputs):
            x = x.detach().clone()
            if x.dtype == torch.float32 and (grad is None or grad[i]):
                x.requires_grad_(True)
            leaves.append(x)
        out = fn(*leaves)
        gout = self.rand(*out.shape)
        if any(x.requires_grad for x in leaves):
            out.backward(gout)
        for i, x in enumerate(leaves):
            self.tensors[f"{key}.in.{i}"] = x.detach().numpy()
            if x.requires_grad:
                self.tensors[f"{key}.grad.{i}"] = x.grad.numpy()
        self.tensors[f"{key}.out"] = out.detach().numpy()
        self.tensors[f"{key}.gout"] = gout.numpy()

    def save(self):
        os.makedirs(FIXTURES, exist_ok=True)
        path = os.path.join(FIXTURES, self.name + ".safetensors")
        save_safetensors(path, self.tensors, {"generator": "tests/ref/" + self.name + ".py",
                                              "torch": torch.__version__})
        print(f"wrote {os.path.normpath(path)} ({len(self.tensors)} tensors)")
