"""Tiny Hugging Face-layout checkpoints in the key/dtype variants hub files come in, with torch reference outputs,
for tests/test_hf.c. Written to tests/fixtures/hf/<case>/ (config.json, weights, reference.safetensors):

  bert_hub         "bert." prefix, TF-era LayerNorm.gamma/beta, cls.* pretraining head, embeddings.position_ids
                   (I64) buffer, all weights F16; padded batch with token types.
  roberta_sharded  "roberta." prefix, no pooler (a masked-LM checkpoint), lm_head.* head, BF16 weights split over
                   two shards + model.safetensors.index.json; RoBERTa position ids with padding.
  gpt2_hub         "transformer." prefix, h.N.attn.bias (BOOL) / attn.masked_bias buffers, tied lm_head.weight,
                   Conv1D [in, out] weights, F32; a right-padded batch with an attention mask.

The forward passes below are written from the HF model definitions' semantics (eval mode); weights are rounded to
the stored dtype before the reference runs, so the C side must reproduce them exactly up to float32 rounding.
usage: /usr/bin/python3 tests/ref/hf_variants.py"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf")
gen = torch.Generator().manual_seed(11)


def rnd(*shape, std=0.3):
    return torch.randn(shape, generator=gen) * std


def raw_bytes(t, dtype):
    if dtype == "F32":
        return t.to(torch.float32).contiguous().numpy().tobytes()
    if dtype == "F16":
        return t.to(torch.float16).contiguous().numpy().tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()
    if dtype == "I64":
        return t.to(torch.int64).contiguous().numpy().tobytes()
    if dtype == "BOOL":
        return t.to(torch.bool).contiguous().numpy().astype(np.uint8).tobytes()
    raise ValueError(dtype)


def write_st(path, entries):
    """entries: list of (name, tensor, dtype), written in the given order."""
    header, blobs, off = {}, [], 0
    for name, t, dtype in entries:
        b = raw_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rounded(t, dtype):
    return {"F32": t, "F16": t.half().float(), "BF16": t.bfloat16().float()}[dtype]


def heads_attention(q, k, v, nh, add_mask):
    B, T, E = q.shape
    hd = E // nh
    sp = lambda x: x.view(B, T, nh, hd).transpose(1, 2)
    s = sp(q) @ sp(k).transpose(-1, -2) / math.sqrt(hd) + add_mask
    p = torch.softmax(s, dim=-1)
    return (p @ sp(v)).transpose(1, 2).reshape(B, T, E), p


def bert_params(cfg):
    E, I = cfg["hidden_size"], cfg["intermediate_size"]
    sd = {"embeddings.word_embeddings.weight": rnd(cfg["vocab_size"], E),
          "embeddings.position_embeddings.weight": rnd(cfg["max_position_embeddings"], E),
          "embeddings.token_type_embeddings.weight": rnd(cfg["type_vocab_size"], E)}

    def lin(name, o, i):
        sd[name + ".weight"], sd[name + ".bias"] = rnd(o, i), rnd(o, std=0.1)

    def ln(name):
        sd[name + ".weight"], sd[name + ".bias"] = 1 + rnd(E, std=0.2), rnd(E, std=0.2)

    ln("embeddings.LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            lin(p + "attention.self." + n, E, E)
        lin(p + "attention.output.dense", E, E)
        ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", I, E)
        lin(p + "output.dense", E, I)
        ln(p + "output.LayerNorm")
    lin("pooler.dense", E, E)
    return sd


def bert_forward(sd, cfg, ids, mask, types, roberta, pooler):
    E, eps, nh = cfg["hidden_size"], cfg["layer_norm_eps"], cfg["num_attention_heads"]
    B, T = ids.shape
    if roberta:
        pad = cfg["pad_token_id"]
        m = (ids != pad).long()
        pos = torch.cumsum(m, dim=1) * m + pad
    else:
        pos = torch.arange(T)[None].expand(B, T)
    x = (sd["embeddings.word_embeddings.weight"][ids] + sd["embeddings.position_embeddings.weight"][pos]
         + sd["embeddings.token_type_embeddings.weight"][types])
    x = F.layer_norm(x, (E,), sd["embeddings.LayerNorm.weight"], sd["embeddings.LayerNorm.bias"], eps)
    add = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    L = lambda k, t: F.linear(t, sd[k + ".weight"], sd[k + ".bias"])
    out = {}
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        o, pr = heads_attention(L(p + "attention.self.query", x), L(p + "attention.self.key", x),
                                L(p + "attention.self.value", x), nh, add)
        out[f"attentions.{i}"] = pr
        x = F.layer_norm(L(p + "attention.output.dense", o) + x, (E,), sd[p + "attention.output.LayerNorm.weight"],
                         sd[p + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(L(p + "intermediate.dense", x))
        x = F.layer_norm(L(p + "output.dense", h) + x, (E,), sd[p + "output.LayerNorm.weight"],
                         sd[p + "output.LayerNorm.bias"], eps)
    out["last_hidden_state"] = x
    if pooler:
        out["pooler_output"] = torch.tanh(L("pooler.dense", x[:, 0]))
    return out


def gpt2_params(cfg):
    E, V, P = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    sd = {"wte.weight": rnd(V, E), "wpe.weight": rnd(P, E)}
    for i in range(cfg["n_layer"]):
        h = f"h.{i}."
        for n in ("ln_1", "ln_2"):
            sd[h + n + ".weight"], sd[h + n + ".bias"] = 1 + rnd(E, std=0.2), rnd(E, std=0.2)
        sd[h + "attn.c_attn.weight"], sd[h + "attn.c_attn.bias"] = rnd(E, 3 * E), rnd(3 * E, std=0.1)
        sd[h + "attn.c_proj.weight"], sd[h + "attn.c_proj.bias"] = rnd(E, E), rnd(E, std=0.1)
        sd[h + "mlp.c_fc.weight"], sd[h + "mlp.c_fc.bias"] = rnd(E, 4 * E), rnd(4 * E, std=0.1)
        sd[h + "mlp.c_proj.weight"], sd[h + "mlp.c_proj.bias"] = rnd(4 * E, E), rnd(E, std=0.1)
    sd["ln_f.weight"], sd["ln_f.bias"] = 1 + rnd(E, std=0.2), rnd(E, std=0.2)
    return sd


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def gpt2_forward(sd, cfg, ids, mask):
    E, eps, nh = cfg["n_embd"], cfg["layer_norm_epsilon"], cfg["n_head"]
    B, T = ids.shape
    x = sd["wte.weight"][ids] + sd["wpe.weight"][torch.arange(T)][None]
    lo = torch.finfo(torch.float32).min
    add = torch.full((T, T), lo).triu(1)[None, None] + (1.0 - mask[:, None, None, :].float()) * lo
    add = add.clamp(min=lo)
    out = {}
    for i in range(cfg["n_layer"]):
        h = f"h.{i}."
        a = F.layer_norm(x, (E,), sd[h + "ln_1.weight"], sd[h + "ln_1.bias"], eps)
        qkv = a @ sd[h + "attn.c_attn.weight"] + sd[h + "attn.c_attn.bias"]
        o, p = heads_attention(*qkv.split(E, dim=2), nh, add)
        out[f"attentions.{i}"] = p
        x = x + o @ sd[h + "attn.c_proj.weight"] + sd[h + "attn.c_proj.bias"]
        m = F.layer_norm(x, (E,), sd[h + "ln_2.weight"], sd[h + "ln_2.bias"], eps)
        x = x + gelu_new(m @ sd[h + "mlp.c_fc.weight"] + sd[h + "mlp.c_fc.bias"]) @ sd[h + "mlp.c_proj.weight"] \
            + sd[h + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (E,), sd["ln_f.weight"], sd["ln_f.bias"], eps)
    out["last_hidden_state"] = x
    out["logits"] = x @ sd["wte.weight"].T
    return out


def write_case(name, cfg, inputs, outputs):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    ref = [(k, v.float(), "F32") for k, v in inputs.items()] + [(k, v, "F32") for k, v in outputs.items()]
    write_st(os.path.join(d, "reference.safetensors"), ref)
    return d


def bert_hub():
    cfg = {"architectures": ["BertForPreTraining"], "model_type": "bert", "vocab_size": 40, "hidden_size": 8,
           "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu",
           "max_position_embeddings": 16, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0}
    sd = {k: rounded(v, "F16") for k, v in bert_params(cfg).items()}
    ids = torch.tensor([[2, 17, 5, 33, 3, 9, 3], [2, 11, 3, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0, 0]])
    with torch.no_grad():
        out = bert_forward(sd, cfg, ids, mask, types, roberta=False, pooler=True)
    d = write_case("bert_hub", cfg, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}, out)
    entries = []
    for k, v in sd.items():
        k = "bert." + k
        if k.endswith("LayerNorm.weight"):
            k = k[: -len("weight")] + "gamma"
        elif k.endswith("LayerNorm.bias"):
            k = k[: -len("bias")] + "beta"
        entries.append((k, v, "F16"))
    entries.append(("bert.embeddings.position_ids", torch.arange(16)[None], "I64"))
    entries.append(("cls.predictions.bias", rnd(40), "F16"))
    entries.append(("cls.predictions.transform.dense.weight", rnd(8, 8), "F16"))
    entries.append(("cls.seq_relationship.weight", rnd(2, 8), "F16"))
    write_st(os.path.join(d, "model.safetensors"), sorted(entries))


def roberta_sharded():
    cfg = {"architectures": ["RobertaForMaskedLM"], "model_type": "roberta", "vocab_size": 50, "hidden_size": 8,
           "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 12, "hidden_act": "gelu",
           "max_position_embeddings": 12, "type_vocab_size": 1, "layer_norm_eps": 1e-5, "pad_token_id": 1,
           "bos_token_id": 0, "eos_token_id": 2}
    sd = {k: rounded(v, "BF16") for k, v in bert_params(cfg).items() if not k.startswith("pooler.")}
    ids = torch.tensor([[0, 17, 5, 33, 42, 9, 2], [0, 11, 2, 1, 1, 1, 1]])
    mask = (ids != 1).long()
    with torch.no_grad():
        out = bert_forward(sd, cfg, ids, mask, torch.zeros_like(ids), roberta=True, pooler=False)
    d = write_case("roberta_sharded", cfg, {"input_ids": ids, "attention_mask": mask}, out)
    entries = sorted(("roberta." + k, v, "BF16") for k, v in sd.items())
    entries += [("lm_head.bias", rnd(50), "BF16"), ("lm_head.dense.weight", rnd(8, 8), "BF16")]
    half = len(entries) // 2
    shards = {"model-00001-of-00002.safetensors": entries[:half], "model-00002-of-00002.safetensors": entries[half:]}
    weight_map = {}
    for fname, ents in shards.items():
        write_st(os.path.join(d, fname), ents)
        weight_map.update({k: fname for k, _, _ in ents})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


def gpt2_hub():
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 30, "n_positions": 16,
           "n_embd": 8, "n_layer": 2, "n_head": 2, "n_inner": None, "activation_function": "gelu_new",
           "layer_norm_epsilon": 1e-5, "scale_attn_weights": True, "tie_word_embeddings": True}
    sd = gpt2_params(cfg)
    ids = torch.tensor([[5, 17, 3, 29, 8, 1], [7, 7, 21, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    with torch.no_grad():
        out = gpt2_forward(sd, cfg, ids, mask)
    d = write_case("gpt2_hub", cfg, {"input_ids": ids, "attention_mask": mask}, out)
    entries = [("transformer." + k, v, "F32") for k, v in sd.items()]
    for i in range(cfg["n_layer"]):
        entries.append((f"transformer.h.{i}.attn.bias", torch.ones(16, 16).tril()[None, None].bool(), "BOOL"))
        entries.append((f"transformer.h.{i}.attn.masked_bias", torch.tensor(-1e4), "F32"))
    entries.append(("lm_head.weight", sd["wte.weight"], "F32"))
    write_st(os.path.join(d, "model.safetensors"), sorted(entries))


if __name__ == "__main__":
    bert_hub()
    roberta_sharded()
    gpt2_hub()
    print("wrote", OUT)
