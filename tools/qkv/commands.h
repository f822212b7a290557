/* Every subcommand of qkv (defined in cmd_<name>.c). */
#ifndef QKV_COMMANDS_H
#define QKV_COMMANDS_H

#include "cli.h"

extern const cli_command cmd_demo;
extern const cli_command cmd_bench;
extern const cli_command cmd_bleu;
extern const cli_command cmd_tokenize;
extern const cli_command cmd_rouge;

#endif
