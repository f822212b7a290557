/* The tokenizer of a run trained from token shards. The shards hold ids only; `qkv tokenize shard --bpe DIR` notes
 * the tokenizer it used beside the shard (OUT.tokenizer.json), and data.vocab_file + data.merges_file can name it
 * too. A fresh run copies those files into its directory (vocab.json, merges.txt), as runs that train their own
 * BPE do, so generate / attend / viz / predict can turn text into ids and back. Without them the run has ids only,
 * and text commands say so (qkv__task_no_tokenizer) instead of failing inside the vocabulary code. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qkv/config.h"
#include "qkv/fsutil.h"
#include "qkv/text.h"
#include "train_internal.h"

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static qkv_status copy_file(const char *from, const char *to, const char *key) {
    size_t len;
    char *data = qkv_fs_read_capped(from, (uint64_t)256 << 20, 0, "tokenizer file", &len);
    if (!data) return qkv_error_set(qkv_last_status(), "%s: %s", key, qkv_last_error());
    qkv_status st = qkv_fs_write_atomic(to, data, len);
    free(data);
    return st;
}

/* The tokenizer files a shard was written with, from its OUT.tokenizer.json; false when it has none. */
static bool noted_tokenizer(const char *shard, char *vocab, char *merges, size_t size) {
    char note[4200];
    snprintf(note, sizeof note, "%s.tokenizer.json", shard);
    size_t len;
    char *text = exists(note) ? qkv_fs_read_capped(note, 1 << 20, 0, "tokenizer note", &len) : NULL;
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(j, "tokenizer"));
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(j, "vocab_file"));
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItem(j, "merges_file"));
    bool ok = kind && !strcmp(kind, "bpe") && v && m;
    if (ok) {
        snprintf(vocab, size, "%s", v);
        snprintf(merges, size, "%s", m);
    }
    cJSON_Delete(j);
    return ok;
}

qkv_status qkv__task_shard_tokenizer(task *t, const cJSON *cfg, const char *shard, const char *dir, bool fresh) {
    char vocab[4096], merges[4096], src_v[4096], src_m[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
    snprintf(merges, sizeof merges, "%s/merges.txt", dir);
    const char *vf = qkv_config_str(cfg, "data.vocab_file", ""), *mf = qkv_config_str(cfg, "data.merges_file", "");
    qkv_status st = QKV_OK;
    if (fresh && (*vf || *mf)) {
        if (!*vf || !*mf)
            return qkv_error_set(QKV_ERR_INVALID, "data: a shard's bpe tokenizer needs both vocab_file and merges_file");
        st = copy_file(vf, vocab, "data.vocab_file");
        if (st == QKV_OK) st = copy_file(mf, merges, "data.merges_file");
    } else if (fresh && noted_tokenizer(shard, src_v, src_m, sizeof src_v)) {
        char what[4300];
        snprintf(what, sizeof what, "%s.tokenizer.json", shard);
        st = copy_file(src_v, vocab, what);
        if (st == QKV_OK) st = copy_file(src_m, merges, what);
    }
    if (st != QKV_OK || !exists(vocab) || !exists(merges)) return st;
    qkv_bpe *b = qkv_bpe_load(vocab, merges);
    if (!b) return qkv_last_status();
    if ((int64_t)qkv_bpe_vocab_size(b) != t->vocab_size) {
        st = qkv_error_set(QKV_ERR_FORMAT, "%s: the tokenizer has %zu tokens but the shard %s has a vocabulary of %lld",
                           vocab, qkv_bpe_vocab_size(b), shard, (long long)t->vocab_size);
        qkv_bpe_free(b);
        return st;
    }
    t->bpe = b;
    t->tok = TOK_BPE;
    return QKV_OK;
}

qkv_status qkv__task_no_tokenizer(void) {
    return qkv_error_set(QKV_ERR_UNSUPPORTED,
                         "this run was trained on token ids (data.train is a token shard) and has no tokenizer for "
                         "text: train from shards written by `qkv tokenize shard --bpe DIR` (which notes its "
                         "tokenizer), or with --set data.vocab_file=VOCAB.json --set data.merges_file=MERGES.txt "
                         "naming the files the shards were made with");
}
