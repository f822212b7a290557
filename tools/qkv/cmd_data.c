/* qkv data: build training data from the real text of a corpus, each builder a documented rule that applies to any
 * file of its format (the builders are in tools/qkv/data_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "data_builders.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv data dialogue [--min-turns N] [--max-turns N] [-o OUT] FILE...\n"
            "       qkv data cloze-qa [-n SENTENCES] [--seed S] [--kinds named,nouns] [--max N] [--blank TEXT]\n"
            "                     [-o OUT.jsonl] FILE\n"
            "       qkv data check-qa FILE.jsonl\n\n"
            "dialogue  writes one conversation a line, \"Person 1: ... Person 2: ... Person 1: ...\", from the quoted\n"
            "          speech of plain-text novels (one paragraph a line), to OUT (default standard output), and\n"
            "          a summary to standard error. The rule (include/qkv/dialogue.h, docs/reformer.md):\n"
            "            - a paragraph's speech is the text inside its double quotes; narration is dropped;\n"
            "            - a paragraph that leaves a quote open continues its speaker into the next one;\n"
            "            - every other paragraph with speech is a new turn by the other person;\n"
            "            - a paragraph without speech ends the conversation.\n"
            "          Conversations of fewer than --min-turns (default 2) turns are dropped; --max-turns N (default\n"
            "          0, no limit) cuts longer ones into pieces of N turns.\n"
            "cloze-qa  turns plain text (one paragraph a line) into SQuAD-format JSONL in the style of the Children's\n"
            "          Book Test: SENTENCES consecutive sentences (default 20) are the context, the next sentence is\n"
            "          the question with one word that also occurs in the context blanked out as XXXXX (--blank\n"
            "          TEXT: as TEXT, e.g. <extra_id_0>, the sentinel a T5 run reads as the blank it learnt to fill), and the\n"
            "          answer is that word at its first occurrence in the context (character offset). Words are named\n"
            "          words and common nouns (--kinds), picked with the seed; docs/qa.md gives the exact rules.\n"
            "          Writes OUT (default standard output) and prints the count to standard error.\n"
            "check-qa  reads a SQuAD JSONL file and checks every answer against its context (exit 2 naming the\n"
            "          line of the first that does not match); prints the number of examples.\n\n"
            "An output file appears whole or not at all: it is written under a temporary name and renamed at the end.\n");
}

static int run(int argc, char **argv) {
    if (argc < 2) return cli_error("data", CLI_USAGE, "which data? (dialogue, cloze-qa, check-qa; see qkv data --help)");
    if (!strcmp(argv[1], "dialogue")) return cli_data_dialogue(argc, argv);
    if (!strcmp(argv[1], "cloze-qa")) return cli_data_cloze_qa(argc, argv);
    if (!strcmp(argv[1], "check-qa")) return cli_data_check_qa(argc, argv);
    return cli_error("data", CLI_USAGE, "unknown data builder '%s' (known: dialogue, cloze-qa, check-qa)", argv[1]);
}

const cli_command cmd_data = {"data", "build training data from raw text (dialogue, cloze-qa questions)", run, help};
