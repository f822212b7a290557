/* The decoding commands' repetition options (cli_repeat.h). */
#include <string.h>

#include "cli.h"
#include "cli_repeat.h"

cli_repeat cli_repeat_defaults(void) {
    return (cli_repeat){.no_repeat_ngram = 0, .repetition_penalty = 1.0f, .scope = QKV_REPEAT_GENERATED};
}

int cli_repeat_arg(const char *cmd, int argc, char **argv, int *i, cli_repeat *r) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (strcmp(a, "--no-repeat-ngram") && strcmp(a, "--repetition-penalty") && strcmp(a, "--repeat-scope")) return 0;
    if (!v) {
        cli_error(cmd, CLI_USAGE, "%s needs a value (see qkv %s --help)", a, cmd);
        return -1;
    }
    ++*i;
    if (!strcmp(a, "--no-repeat-ngram")) {
        long n;
        if (!cli_parse_int(cmd, a, v, 0, 1 << 20, &n)) return -1;
        r->no_repeat_ngram = (int)n;
    } else if (!strcmp(a, "--repetition-penalty")) {
        double p;
        if (!cli_parse_double(cmd, a, v, 1e-3, 100, &p)) return -1;
        r->repetition_penalty = (float)p;
    } else if (!qkv_repeat_scope_parse(v, &r->scope)) {
        cli_error(cmd, CLI_USAGE, "--repeat-scope: '%s' is not generated or all", v);
        return -1;
    }
    return 1;
}
