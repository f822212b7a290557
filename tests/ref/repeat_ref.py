"""Reference for qkv's repetition control (include/qkv/repeat.h): Hugging Face's no-repeat n-gram rule
(_get_ngrams / _get_generated_ngrams / _calc_banned_ngram_tokens of transformers' NoRepeatNGramLogitsProcessor) and
its RepetitionPenaltyLogitsProcessor, re-implemented as transformers writes them, applied to fixed sequences of
logits so that the C loops (tests/test_repeat.c) can be checked token for token.

Each case is a prompt and S rows of logits [S, V]: the logits of generated position g are row g whatever was chosen
before (a "model" that ignores its input), built to loop ("3 4 5 3 4 5 ...") and to copy the prompt ("6 7 8") so
that the rules have something to do. Two decoding loops, greedy:
  generate: qkv_generate's loop. The processors on the raw logits (HF's greedy search), the argmax; generation ends
            at EOS (a stop token, not emitted) or when every token is banned (qkv's rule: as if stopped).
  decode:   beam.h's greedy search through a prompted decoder. log_softmax first, then the processors (HF's beam
            search processes log-probabilities), then BOS (the prompt's last token) and padding are banned; when no
            allowed token is left above -inf, EOS gets back its (penalised) log-probability (qkv's fallback).
History: the generated tokens (scope "generated"), or prompt + generated (scope "all": HF's decoder-only input_ids).

Run with Debian's interpreter: /usr/bin/python3 tests/ref/repeat_ref.py (writes tests/fixtures/repeat_ref.jsonl)."""
import json
import os

import torch

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")


# ---- transformers' functions, as written there ----
def _get_ngrams(ngram_size, prev_input_ids, num_hypos):
    generated_ngrams = [{} for _ in range(num_hypos)]
    for idx in range(num_hypos):
        gen_tokens = prev_input_ids[idx].tolist()
        generated_ngram = generated_ngrams[idx]
        for ngram in zip(*[gen_tokens[i:] for i in range(ngram_size)]):
            prev_ngram_tuple = tuple(ngram[:-1])
            generated_ngram[prev_ngram_tuple] = generated_ngram.get(prev_ngram_tuple, []) + [ngram[-1]]
    return generated_ngrams


def _get_generated_ngrams(banned_ngrams, prev_input_ids, ngram_size, cur_len):
    start_idx = cur_len + 1 - ngram_size
    ngram_idx = tuple(prev_input_ids[start_idx:cur_len].tolist())
    return banned_ngrams.get(ngram_idx, [])


def _calc_banned_ngram_tokens(ngram_size, prev_input_ids, num_hypos, cur_len):
    if cur_len + 1 < ngram_size:
        return [[] for _ in range(num_hypos)]
    generated_ngrams = _get_ngrams(ngram_size, prev_input_ids, num_hypos)
    return [_get_generated_ngrams(generated_ngrams[h], prev_input_ids[h], ngram_size, cur_len)
            for h in range(num_hypos)]


def no_repeat_ngram(ngram_size, input_ids, scores):
    cur_len = input_ids.shape[-1]
    banned = _calc_banned_ngram_tokens(ngram_size, input_ids, scores.shape[0], cur_len)
    for i, tokens in enumerate(banned):
        scores[i, tokens] = -float("inf")
    return scores


def repetition_penalty(penalty, input_ids, scores):
    if input_ids.shape[-1] == 0:
        return scores
    score = torch.gather(scores, 1, input_ids)
    score = torch.where(score < 0, score * penalty, score / penalty)
    scores.scatter_(1, input_ids, score)
    return scores


def process(case, history, scores):
    ids = torch.tensor([history], dtype=torch.int64).reshape(1, len(history))
    if case["penalty"] != 1.0:
        scores = repetition_penalty(case["penalty"], ids, scores)
    if case["N"] > 0:
        scores = no_repeat_ngram(case["N"], ids, scores)
    return scores


# ---- the two loops ----
def run_generate(case, logits):
    prompt, eos, out = case["prompt"], case["eos"], []
    for g in range(logits.shape[0]):
        hist = (prompt if case["scope"] == "all" else []) + out
        scores = process(case, hist, logits[g:g + 1].clone())
        if case["N"] > 0 and bool(torch.all(scores == -float("inf"))):
            return out, "stop", True
        t = int(torch.argmax(scores[0]))
        if t == eos:
            return out, "stop", False
        out.append(t)
    return out, "max", False


def run_decode(case, logits):
    prompt, eos, pad, out = case["prompt"], case["eos"], case["pad"], []
    bos, fallback = prompt[-1], False
    for g in range(logits.shape[0]):
        hist = (prompt if case["scope"] == "all" else []) + out
        lp = torch.log_softmax(logits[g:g + 1].clone(), dim=-1)
        if case["penalty"] != 1.0:
            lp = repetition_penalty(case["penalty"], torch.tensor([hist], dtype=torch.int64).reshape(1, len(hist)), lp)
        saved = float(lp[0, eos])
        if case["N"] > 0:
            lp = no_repeat_ngram(case["N"], torch.tensor([hist], dtype=torch.int64).reshape(1, len(hist)), lp)
            allowed = [v for v in range(lp.shape[1]) if v != bos and v != pad]
            if all(float(lp[0, v]) == -float("inf") for v in allowed):
                lp[0, eos] = saved
                fallback = True
        lp[0, bos] = -float("inf")
        lp[0, pad] = -float("inf")
        t = int(torch.argmax(lp[0]))
        out.append(t)
        if t == eos:
            return out, True, fallback
    return out, False, fallback


def main():
    V, S, eos, pad = 12, 14, 2, 0
    prompt = [6, 7, 8, eos, 9]  # article </s> <sep>, as a summarize prompt ends
    lines, k = [], 0
    for N in (0, 1, 2, 3):
        for penalty in (1.0, 2.0):
            for scope in ("generated", "all"):
                gen = torch.Generator().manual_seed(100 + k)
                logits = torch.randn(S, V, generator=gen) * 0.7
                for t in range(S):
                    logits[t, 3 + t % 3] += 3.0   # a loop: 3 4 5 3 4 5 ...
                    if 6 <= t < 11:
                        logits[t, 6 + t % 3] += 4.0  # copying the prompt: 6 7 8
                logits[:, eos] -= 2.0
                logits = logits.to(torch.float32)
                case = {"name": f"N{N}_p{penalty}_{scope}", "V": V, "N": N, "penalty": penalty, "scope": scope,
                        "eos": eos, "pad": pad, "prompt": prompt}
                g_tok, g_end, g_banned = run_generate(case, logits)
                d_tok, d_fin, d_fallback = run_decode(case, logits)
                case["logits"] = [[float(x) for x in row] for row in logits.tolist()]
                case["generate"] = {"tokens": g_tok, "end": g_end, "all_banned": g_banned}
                case["decode"] = {"tokens": d_tok, "finished": d_fin, "fallback": d_fallback}
                lines.append(json.dumps(case))
                k += 1
    os.makedirs(FIXTURES, exist_ok=True)
    path = os.path.join(FIXTURES, "repeat_ref.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.normpath(path)} ({len(lines)} cases)")


if __name__ == "__main__":
    main()
