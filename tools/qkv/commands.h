/* Every subcommand of qkv (defined in cmd_<name>.c). */
#ifndef QKV_COMMANDS_H
#define QKV_COMMANDS_H

#include "cli.h"

extern const cli_command cmd_demo;
extern const cli_command cmd_viz;
extern const cli_command cmd_plot;
extern const cli_command cmd_generate;
extern const cli_command cmd_translate;
extern const cli_command cmd_summarize;
extern const cli_command cmd_bench;
extern const cli_command cmd_bleu;
extern const cli_command cmd_tokenize;
extern const cli_command cmd_rouge;
extern const cli_command cmd_embed;
extern const cli_command cmd_attend;
extern const cli_command cmd_train;
extern const cli_command cmd_eval;
extern const cli_command cmd_predict;
extern const cli_command cmd_tag;
extern const cli_command cmd_config;
extern const cli_command cmd_similar;
extern const cli_command cmd_lesson;
extern const cli_command cmd_serve; /* built with libmicrohttpd (QKV_HAVE_SERVE) */
extern const cli_command cmd_data;
extern const cli_command cmd_chat;
extern const cli_command cmd_answer;

#endif
