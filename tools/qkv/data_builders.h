/* The builders of `qkv data` (tools/qkv/cmd_data.c dispatches): each takes the command's argv (argv[1] is the
 * builder's name) and returns the exit code. */
#ifndef QKV_CLI_DATA_BUILDERS_H
#define QKV_CLI_DATA_BUILDERS_H

int cli_data_dialogue(int argc, char **argv); /* data_dialogue.c */
int cli_data_cloze_qa(int argc, char **argv); /* data_qa.c */
int cli_data_check_qa(int argc, char **argv); /* data_qa.c */

#endif
