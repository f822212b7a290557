/* Line-oriented data readers: lines, TSV, CSV and JSONL (format and options from the first byte), every record. */
#include "fuzz.h"
#include "qkv/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
    qkv_data_opts o = {.format = (qkv_data_format)(data[0] & 3),
                       .n_fields = (data[0] >> 2) & 3,
                       .max_line = (data[0] & 16) ? 64 : 0,
                       .keep_blank = data[0] & 32,
                       .skip_header = data[0] & 64};
    qkv_reader *r = qkv_reader_open_mem("fuzz", (const char *)data + 1, size - 1, &o);
    if (!r) return 0;
    const qkv_data_record *rec;
    while (qkv_reader_next(r, &rec) == QKV_OK && rec) {
        for (int i = 0; i < rec->n_fields; i++) (void)qkv_utf8_valid(rec->fields[i], rec->lens[i], NULL);
    }
    qkv_reader_close(r);
    return 0;
}
