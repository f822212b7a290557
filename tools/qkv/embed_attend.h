/* qkv embed attend: attention as similarity-weighted averaging of GloVe vectors (embed_attend.c). */
#ifndef QKV_EMBED_ATTEND_H
#define QKV_EMBED_ATTEND_H

#include <stdio.h>

/* argv[0] is "attend"; the options after it. Returns an exit code. */
int embed_attend(int argc, char **argv, const char *default_vectors);
/* The usage line(s), and the description of the action for `qkv embed --help`. */
void embed_attend_usage(FILE *out);
void embed_attend_help(FILE *out);

#endif
