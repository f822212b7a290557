/* qkv serve's request parser (tools/qkv/serve_request.c) on arbitrary bodies. An input is "<endpoint path>\n<body>"
 * (e.g. "/v1/classify\n{...}"), or, when it does not start with '/', its first byte picks the endpoint. Beyond not
 * crashing, the parser's contract is checked: 0 with a complete request, or 400 with a message and a field name. */
#include "fuzz.h"
#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT || size == 0) return 0;
    int ep = -1;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] == '/') {
        const uint8_t *nl = memchr(data, '\n', size);
        if (nl) {
            char *path = fuzz_str(data, (size_t)(nl - data));
            ep = serve_endpoint_of(path);
            free(path);
            body = (const char *)nl + 1;
            len = size - (size_t)(nl + 1 - data);
        }
    }
    if (ep < 0) ep = data[0] % SERVE_N_ENDPOINTS;
    serve_request r;
    const char *field = NULL;
    char msg[256];
    int rc = serve_request_parse((serve_endpoint)ep, body, len, &r, &field, msg, sizeof msg);
    if (rc == 0) {
        if (r.n_texts < 1 || !r.texts || r.n_best > r.beam || r.max_tokens < 0 || r.max_tokens > SERVE_MAX_TOKENS ||
            (r.ep == SERVE_SIMILAR && r.n_texts != 2))
            abort();
        for (int i = 0; i < r.n_texts; i++)
            if (!r.texts[i]) abort();
        serve_request_free(&r);
    } else if (rc != 400 || !field || !msg[0]) {
        abort();
    }
    return 0;
}
