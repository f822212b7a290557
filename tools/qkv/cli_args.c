/* A flag given last without its value (`qkv train --config emb.json --run`): every command's parser would only see
 * an unexpected argument. The command's own help says which flags take a value ("--run DIR", "-o OUT.html",
 * "--split dev|test"), so one check here covers every command. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Whether a word after a flag in help text is a value placeholder: an upper-case word (DIR, FILE, N, PAGE.html), a
 * quoted text ("second"), a number, a list (64,128,... or named,nouns: a comma with more after it) or a word with
 * '|' or '=' (dev|test, key.path=value). A lower-case word is prose ("--all, every word"; "--cased to keep"). */
static bool placeholder(const char *w, size_t len) {
    unsigned char c = (unsigned char)w[0];
    if (isupper(c) || isdigit(c) || c == '"' || c == '\'') return true;
    return memchr(w, '|', len) || memchr(w, '=', len) || (len > 1 && memchr(w, ',', len - 1));
}

/* Whether help text shows flag followed by a value placeholder, and nowhere as a bare switch (followed by another
 * option, a closing bracket or the line's end): a flag that is a switch in one usage line and takes a value in another
 * (`tokenize train --wordpiece [--cased]` against `tokenize encode --wordpiece VOCAB.txt`) is left to the parser. */
static bool takes_value(const char *help, const char *flag) {
    size_t n = strlen(flag);
    bool value = false;
    for (const char *p = strstr(help, flag); p; p = strstr(p + 1, flag)) {
        bool starts = p == help || strchr(" [(|,\n", p[-1]);
        if (!starts) continue;
        if (p[n] == ']' || p[n] == '\n' || p[n] == '\0' || (p[n] == ' ' && (p[n + 1] == '[' || p[n + 1] == '-')))
            return false;
        if (p[n] != ' ') continue;
        const char *w = p + n + 1;
        size_t len = strcspn(w, " ]\n)");
        if (len && placeholder(w, len)) value = true;
    }
    return value;
}

int cli_check_last_value(const cli_command *c, int argc, char **argv) {
    if (argc < 2) return CLI_OK;
    const char *last = argv[argc - 1];
    if (last[0] != '-' || !last[1] || isdigit((unsigned char)last[1]) || last[1] == '.') return CLI_OK;
    char *help = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&help, &size);
    if (!f) return CLI_OK;
    c->help(f);
    fclose(f);
    bool value = help && takes_value(help, last);
    free(help);
    if (!value) return CLI_OK;
    return cli_error(c->name, CLI_USAGE, "%s needs a value (see qkv %s --help)", last, c->name);
}
